// tetra serve: the HTTP server (cpp-httplib) around the API (serve_api.cpp) and the runs
// (serve_runs.cpp): the page's files, the Host check, the token, the limits, the signals.
#include "jobs/serve.hpp"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "jobs/serve_api.hpp"
#include "jobs/serve_assets.hpp"
#include "jobs/serve_runs.hpp"
#include "util/settings.hpp"

namespace tetra {
namespace {

using serve::Reply;

// Connections served at once: a run's event stream holds one while it runs.
constexpr size_t kThreads = 8;
// Seconds a client may take to send a request, or to take a response's bytes.
constexpr time_t kIoTimeout = 5;
// How often a quiet event stream is written to, which is how a closed page is noticed.
constexpr auto kHeartbeat = std::chrono::milliseconds(1000);

// 128 random bits, in hex.
std::string random_token() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char bytes[16];
  check(bool(in.read(reinterpret_cast<char*>(bytes), sizeof bytes)),
        "cannot read /dev/urandom for the token");
  std::string hex;
  for (unsigned char b : bytes) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  return hex;
}

// Compares in time that does not depend on where they differ.
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i] ^ b[i]);
  return diff == 0;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

// The host as a URL and a Host header write it: an IPv6 address in brackets.
std::string url_host(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// The Host headers that name this server: its address and port, and on the loopback the other
// names of the loopback.
std::set<std::string> allowed_hosts(const std::string& host, int port) {
  std::set<std::string> out = {url_host(host) + ":" + std::to_string(port)};
  if (is_loopback(host))
    for (const char* h : {"127.0.0.1", "localhost", "[::1]"})
      out.insert(std::string(h) + ":" + std::to_string(port));
  return out;
}

const char* content_type(const std::string& name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

void send(httplib::Response& res, const Reply& r) {
  res.status = r.status;
  // A refusal may quote the request's bytes, which need not be UTF-8.
  res.set_content(r.body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                  "application/json; charset=utf-8");
}

// A handler that answers f(req)'s reply, or the refusal it threw, as JSON.
httplib::Server::Handler json_handler(std::function<Reply(const httplib::Request&)> f) {
  return [f = std::move(f)](const httplib::Request& req, httplib::Response& res) {
    Reply r;
    try {
      r = f(req);
    } catch (const serve::BadRequest& e) {
      r = serve::refusal(e.what(), e.http);
    } catch (const Error& e) {
      r = serve::refusal(settings::worded(e.what()));
    }
    send(res, r);
  };
}

// What a refusal that no handler worded says.
std::string status_words(int status) {
  switch (status) {
    case 400:
      return "malformed request";
    case 404:
      return "no such page";
    case 413:
      return "the request is too large";
    case 414:
      return "the request's line is too long";
    default:
      return "HTTP status " + std::to_string(status);
  }
}

struct Server {
  const ServeOptions& o;
  serve::Api api;
  serve::RunSlot runs;
  httplib::Server http;
  std::string token;
  std::set<std::string> hosts;
  std::atomic<bool> stopping{false};

  Server(const ServeOptions& o, const TrainArgs& train, const PlanArgs& plan)
      : o(o), api(o, train, plan) {}

  bool has_token(const httplib::Request& req) const {
    return same_secret(req.get_header_value("X-Tetra-Token"), token);
  }

  // An event stream of the run `work` started, or a refusal: no token, or a run going.
  void stream(httplib::Response& res, const httplib::Request& req,
              const std::function<serve::RunSlot::Work()>& work) {
    if (!has_token(req))
      return send(res, serve::refusal("starting a run needs the token tetra serve printed with "
                                      "its address (open the address it printed)",
                                      403));
    serve::RunSlot::Work w;
    try {
      w = work();
    } catch (const serve::BadRequest& e) {
      return send(res, serve::refusal(e.what(), e.http));
    } catch (const Error& e) {
      return send(res, serve::refusal(settings::worded(e.what())));
    }
    const std::shared_ptr<serve::EventStream> events = runs.start(std::move(w));
    if (!events)
      return send(res, serve::refusal("a run is going (one at a time); wait for it to end", 409));
    res.set_header("Cache-Control", "no-store");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, events](size_t, httplib::DataSink& sink) {
          std::vector<std::string> out;
          const bool ended = events->take(out, kHeartbeat);
          if (out.empty() && !ended) out.push_back(": still running\n\n");
          for (const std::string& e : out)
            if (!sink.write(e.data(), e.size())) {
              events->stop();
              return false;
            }
          if (ended || stopping) {
            if (!ended) events->stop();
            sink.done();
          }
          return true;
        },
        [events](bool success) {
          if (!success) events->stop();
        });
  }

  void routes() {
    for (const serve::Asset& a : serve::page_assets()) {
      const std::string path = a.name == "index.html" ? "/" : "/" + std::string(a.name);
      http.Get(path, [a](const httplib::Request&, httplib::Response& res) {
        res.set_content(a.body.data(), a.body.size(), content_type(std::string(a.name)));
      });
    }
    http.Get("/api/options",
             json_handler([this](const httplib::Request&) { return api.options(); }));
    http.Post("/api/plan",
              json_handler([this](const httplib::Request& req) { return api.plan(req.body); }));
    http.Get("/api/lessons", json_handler([this](const httplib::Request& req) {
               return api.lessons(req.get_param_value("lang"));
             }));
    http.Get("/api/lesson", json_handler([this](const httplib::Request& req) {
               return api.lesson(req.get_param_value("name"), req.get_param_value("lang"));
             }));
    http.Post("/api/answer",
              json_handler([this](const httplib::Request& req) { return api.answer(req.body); }));
    http.Get("/api/status", json_handler([this](const httplib::Request&) {
               return Reply{200, {{"run", runs.state()}}};
             }));
    http.Post("/api/run", [this](const httplib::Request& req, httplib::Response& res) {
      stream(res, req, [&] {
        serve::RunRequest r = api.run_request(req.body);
        const TrainArgs train = api.train();
        return [r = std::move(r), train](serve::EventStream& e) {
          serve::run_layout_work(e, r, train);
        };
      });
    });
    http.Post("/api/lesson/run", [this](const httplib::Request& req, httplib::Response& res) {
      stream(res, req, [&] {
        const serve::Api::LessonRequest r = api.lesson_request(req.body);
        const TrainArgs train = api.train();
        const JobOptions job = o.job;
        return [r, train, job](serve::EventStream& e) { serve::run_lesson_work(e, r, job, train); };
      });
    });
  }

  void guard() {
    http.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
    http.set_read_timeout(kIoTimeout);
    http.set_write_timeout(kIoTimeout);
    http.set_keep_alive_timeout(kIoTimeout);
    http.set_payload_max_length(64 * 1024);
    http.set_default_headers({{"X-Content-Type-Options", "nosniff"},
                              {"Referrer-Policy", "no-referrer"},
                              {"Cache-Control", "no-store"},
                              {"Content-Security-Policy",
                               "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; frame-ancestors 'none'"}});
    // DNS rebinding: a page of another site that a name of its own now points here still
    // sends that name as its Host.
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const std::string host = req.get_header_value("Host");
      if (hosts.count(host)) return httplib::Server::HandlerResponse::Unhandled;
      send(res, serve::refusal("Host '" + host.substr(0, 100) +
                                   "' is not the address tetra serve listens on (" +
                                   *hosts.begin() + ")",
                               403));
      return httplib::Server::HandlerResponse::Handled;
    });
    http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (res.body.empty()) send(res, serve::refusal(status_words(res.status), res.status));
    });
    http.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "unknown";
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          send(res, serve::refusal("internal error: " + what, 500));
        });
  }
};

}  // namespace

int run_serve(const ServeOptions& o, const TrainArgs& train, const PlanArgs& plan) {
  check(o.host != "0.0.0.0" && o.host != "::" && !o.host.empty(),
        "--host takes the one address the page is opened at (the Host check needs it), not '",
        o.host, "'");
  // SIGINT and SIGTERM are waited for by one thread; every other thread, the server's too,
  // blocks them (the jobs' processes start with none blocked: jobs/process.cpp).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Server s(o, train, plan);
  s.guard();
  s.routes();
  const int port = o.port == 0 ? s.http.bind_to_any_port(o.host)
                               : (s.http.bind_to_port(o.host, o.port) ? o.port : -1);
  check(port > 0, "cannot listen on ", url_host(o.host), ":", o.port, ": ", std::strerror(errno));
  s.hosts = allowed_hosts(o.host, port);
  s.token = random_token();
  std::printf("tetra serve: http://%s:%d/?token=%s\n", url_host(o.host).c_str(), port,
              s.token.c_str());
  std::printf("(open that address; the token in it lets the page start runs; Ctrl-C stops)\n");
  std::fflush(stdout);

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    s.stopping = true;
    s.runs.stop();
    s.http.stop();
  });
  s.http.listen_after_bind();
  if (!s.stopping) pthread_kill(waiter.native_handle(), SIGTERM);  // to end its wait
  waiter.join();
  s.runs.stop();
  std::printf("tetra serve: stopped\n");
  return 0;
}

}  // namespace tetra
