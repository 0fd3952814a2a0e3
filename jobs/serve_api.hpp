// tetra serve's JSON API, without the HTTP: each endpoint a function from the request's text
// to a status and a JSON body, over the code the CLI runs. A request's settings are the
// page's form, by section as a configuration file has them ({"layout": {"tp": 2}, "plan":
// {"gpu": "h100"}}); they become tetra plan's flags and go through its parser, so that every
// check and every message is the CLI's (a setting a message names worded as its flag).
#pragma once
#include <string>
#include <vector>

#include "jobs/lab_lessons.hpp"
#include "jobs/layout_run.hpp"
#include "jobs/serve.hpp"
#include "util/json.hpp"

namespace tetra::serve {

// A refusal of a request: its status (400 unless said) and one line saying why.
struct BadRequest : Error {
  explicit BadRequest(const std::string& what, int http = 400) : Error(what), http(http) {}
  int http;
};

// What an endpoint answers.
struct Reply {
  int status = 200;
  json body;
};
// {"error": why} with a 4xx status.
Reply refusal(const std::string& why, int status = 400);

// The settings a page may give: the preset, every setting of the layout, model and batch that
// is a number, a switch or a choice (never a free text such as a path), the ZeRO stage,
// recompute and the dtype, and tetra plan's --gpu. "section.name" -> its flag.
std::vector<std::string> page_setting_keys();

// The request's body, a JSON object of at most `limit` bytes, or BadRequest.
json parse_body(const std::string& body);

// Its "settings" (an object by section) as tetra plan's arguments: "--flag=value", or
// "--flag" for a switch that is on. BadRequest for a setting the page may not give, or a value
// that is not a number, a string or a switch's true or false.
std::vector<std::string> plan_arguments(const json& settings);

// A run the page asked for, parsed and bounded: the sweep's options for it (the page's model,
// batch and dtype; this machine's CPU, steps, a temporary --out set when it starts) and its
// layout, planned.
struct RunRequest {
  SweepOptions options;
  plan::Machine machine;
  LayoutRun layout;
  std::string command;  // the tetra train command line, shown on the page
};

class Api {
 public:
  Api(const ServeOptions& o, TrainArgs train, PlanArgs plan);

  // GET /api/options: the choices of the page's inputs, their defaults, the run's bounds.
  Reply options() const;
  // POST /api/plan {"settings": ...}: the plan (tetra plan --json's object), the timeline
  // (tetra's SVG of the schedule), the effective settings and the tetra plan command line.
  Reply plan(const std::string& body) const;
  // GET /api/lessons?lang=: the lessons' names and titles. GET /api/lesson?name=&lang=: one
  // lesson's title, idea and question. POST /api/answer {"lesson", "lang", "answer"}: the
  // answer read, graded, and a wrong one diagnosed (its mistake's words) or given the hint.
  Reply lessons(const std::string& lang) const;
  Reply lesson(const std::string& name, const std::string& lang) const;
  Reply answer(const std::string& body) const;

  // POST /api/run {"settings", "steps"}: the run, within the bounds, or BadRequest.
  RunRequest run_request(const std::string& body) const;
  // POST /api/lesson/run {"lesson", "lang", "answers"}: the lesson and the answers, or
  // BadRequest.
  struct LessonRequest {
    const lab::Lesson* lesson = nullptr;
    lab::Lang lang = lab::Lang::En;
    std::vector<double> answers;
  };
  LessonRequest lesson_request(const std::string& body) const;

  const ServeOptions& options_given() const { return o_; }
  const TrainArgs& train() const { return train_; }

 private:
  const lab::Lesson& find(const std::string& name) const;
  ServeOptions o_;
  TrainArgs train_;
  PlanArgs plan_;
  std::vector<lab::Lesson> lessons_;
};

// "en" or "zh" (empty: en), else BadRequest.
lab::Lang lang_named(const std::string& lang);

}  // namespace tetra::serve
