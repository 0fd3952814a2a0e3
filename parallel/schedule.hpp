// Pipeline schedules as pure functions: (kind, PP, V, m, rank, mode) -> the ordered forward
// and backward actions that pipeline rank runs in one step, plus a discrete-event simulator
// that runs all ranks' lists against the cross-stage dependencies (the evidence that a
// schedule cannot deadlock and that its bubble matches the formula). The mode is Megatron's
// forward_only: evaluation runs the same schedule's forwards, in the same order, and nothing
// else, so that training and evaluation are one loop over one list (parallel/pipeline.hpp).
//
// The model is cut into K = PP * V chunks, placed by the schedule (Placement below): looped,
// chunk k on rank k % PP as its virtual stage v = k / PP, or as a V (zb-v). F(mb, k) needs
// F(mb, k - 1); B(mb, k) needs B(mb, k + 1), and B(mb, K - 1) needs F(mb, K - 1); W(mb, k)
// needs B(mb, k). Activations flow from chunk k to chunk k + 1 (looped: rank r -> r + 1, and
// from the last rank's chunk v to rank 0's chunk v + 1), gradients the other way.
//
// Properties every schedule here has (tested in tests/unit/test_schedule*.cpp):
// - each rank runs F and B of every (micro-batch, own chunk) exactly once, F before B;
// - for each chunk, forwards and backwards run in increasing micro-batch order, so weight
//   gradients accumulate in the same order under every schedule (bitwise-equal results);
// - the lists cannot deadlock (SimResult::deadlock), whatever the costs of the passes;
// - the looped schedules run their chunks' actions in the same global (micro-batch, chunk)
//   order on all ranks, so every link (rank pair) carries its activations and gradients, both
//   kinds together, in the order the receiver consumes them: an executor that posts receives
//   in action order never mismatches, even with one tag per link (SimResult::in_order). zb-v
//   may make a gradient after an activation its peer takes later; the executor posts each
//   link's messages in the receiver's order (parallel/pipeline.hpp), which costs no wait;
// - the forward-only list is the training list less its backwards, and keeps all three
//   properties (the simulation runs it too).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tetra {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1, ZeroBubbleV };

// The names `layout.schedule` takes, in ScheduleKind's order: the schema's list
// (parallel/config.hpp), which every flag and check of a schedule name takes from there.
inline const std::vector<std::string> kScheduleNames = {"gpipe", "1f1b", "interleaved", "zb-h1",
                                                        "zb-v"};

// One of kScheduleNames; anything else throws tetra::Error.
ScheduleKind parse_schedule(const std::string& name);
const char* schedule_name(ScheduleKind kind);

// ZB-H1's W delay: rank r runs W(i) right after B(i + min(r, weight_delay)) and its last
// min(r, weight_delay) W at the end. The paper's schedule delays rank r by r (any
// weight_delay >= PP - 1, kPaperWeightDelay); a rank delayed by d holds PP - r micro-batches
// awaiting B and d awaiting W. Where a W's state outweighs a B's, or the last rank's head
// outweighs rank 0's embedding, the paper's delays hold more than 1F1B's fullest rank; the
// planner then picks the largest delay that does not (plan::zb_weight_delay, RankWork's
// weight_delay). kWeightInBackward: no W apart at all, each block's W inside its B as 1F1B runs
// it (1F1B's list and peak; under --recompute full with several blocks a stage even delay 0,
// one chunk's B walk then its W walk, keeps every block's W state at once). Every other
// schedule ignores it.
inline constexpr int kPaperWeightDelay = 1 << 30;
inline constexpr int kWeightInBackward = -1;

// Whether the schedule runs each backward as two actions, B (the input's gradient, which the
// previous chunk waits for) and W (the weight gradients, which only the optimizer needs), as
// the zero-bubble schedules do (Qi et al. 2023). The others' B is the whole backward: the
// executor runs W right after it, and the simulator charges B the cost of both.
// ZB-H1 at weight_delay kWeightInBackward does not.
bool splits_backward(ScheduleKind kind, int weight_delay = kPaperWeightDelay);

// Where the K = PP V model chunks live. Looped (every schedule but zb-v): chunk k on rank
// k % PP as its virtual stage k / PP. V (zb-v, V = 2; Qi et al. 2023): chunk k on rank k for
// k < PP (virtual stage 0), on rank 2 PP - 1 - k for k >= PP (virtual stage 1), so that rank 0
// holds the first and the last chunk (the embedding and the head) and chunk PP - 1 hands over
// to chunk PP on rank PP - 1 itself. PP 4: ranks 0 1 2 3 3 2 1 0 for chunks 0..7.
enum class Placement { Looped, V };
Placement placement(ScheduleKind kind);
// The pipeline rank that holds model chunk k (0 <= k < PP V).
int chunk_rank(Placement placement, int pp, int vpp, int k);
// The model chunk of `rank`'s virtual stage v, and the virtual stage of chunk k on its rank.
int chunk_id(Placement placement, int pp, int rank, int v);
int chunk_virtual_stage(Placement placement, int pp, int k);
// The rank that holds the head (the last chunk): PP - 1 looped, 0 as a V.
int head_rank(Placement placement, int pp);

// Train: every forward and backward; ForwardOnly: the forwards alone (evaluation).
enum class ScheduleMode { Train, ForwardOnly };

struct Action {
  enum Kind { Forward, Backward, Weight } kind;  // F, B, W
  int micro_batch;
  int chunk;  // virtual stage v on this rank (0..V-1); model chunk id: chunk_id(.., rank, v)
  bool operator==(const Action&) const = default;
};

char action_letter(Action::Kind kind);  // 'F', 'B', 'W'

// A rank's schedule lists 2 V m actions (3 V m when it splits the backward), allocated at
// once: V m is bounded first.
inline constexpr int64_t kMaxPasses = 1 << 20;

// Throws tetra::Error unless PP >= 1, V >= 1, m >= PP, V m <= kMaxPasses, V == 1 for gpipe,
// 1f1b and zb-h1, V == 2 for zb-v, and m % PP == 0 for interleaved. Interleaved with V == 1 is
// allowed and yields exactly the 1F1B order (Megatron's doubled warm-up only pays off with V > 1);
// it still needs m % PP == 0, so the rule for `--schedule interleaved` does not depend on V.
void check_schedule(ScheduleKind kind, int pp, int vpp, int micro_batches);

// Ordered actions pipeline rank `rank` runs in one step: 2 * V * m of them in training
// (3 * V * m where the schedule splits the backward), the V * m forwards of that list, in its
// order, under ForwardOnly.
std::vector<Action> make_schedule(ScheduleKind kind, int pp, int vpp, int micro_batches, int rank,
                                  ScheduleMode mode = ScheduleMode::Train,
                                  int weight_delay = kPaperWeightDelay);

// Forwards a rank runs before its first backward (GPipe: all m; zb-v: as its list has them).
int warmup_forwards(ScheduleKind kind, int pp, int vpp, int micro_batches, int rank);

// Most (micro-batch, chunk) pairs whose forward is done and backward (its W, where split) is
// not, on `rank`: GPipe m; 1F1B PP - rank; ZB-H1 PP on every rank (the most 1F1B holds, on
// rank 0); ZB-V 2 PP on every rank (chunks of half a stage: again PP micro-batches of a whole
// stage's activations, 1F1B's rank 0); interleaved min(W + 1, V * m) with the warm-up
// W = 2 (PP - rank - 1) + (V - 1) PP, i.e. at most (V + 1) PP - 1 chunk activations on
// rank 0 (each a 1/V share of the rank's layers: about PP + (PP - 1) / V micro-batches of
// full-stage activations, against PP for 1F1B).
int max_in_flight_bound(ScheduleKind kind, int pp, int vpp, int micro_batches, int rank);

// The idle share with equal stage costs, both ways: of_compute = idle / compute per rank
// = (PP - 1) / (V m); of_step = idle / step = (PP - 1) / (V m + PP - 1) (V = 1 for gpipe
// and 1f1b, which gives (p - 1) / (m + p - 1)). ZB-H1 idles (p - 1)(T_F + T_B - T_W) per
// rank against 1F1B's (p - 1)(T_F + T_B + T_W), which with equal costs T_F = T_B = T_W gives
// of_compute = (p - 1) / (3 m) and of_step = (p - 1) / (3 m + p - 1). ZB-V with equal costs
// per chunk idles p - 1 chunk passes per rank in a step of 6 m: of_compute = (p - 1) / (6 m),
// of_step = (p - 1) / (6 m + p - 1). That is a floor for any order on the V placement (rank
// p - 1 waits p - 1 forwards for its first input, and the step is as long on every rank), and
// make_schedule's order meets it (tests/unit/test_schedule_v.cpp: p <= 8, m from p to 4p + 2).
// ZB-H1 with a weight_delay below PP - 1 has no closed form here: its equal-cost simulation.
struct BubbleForms {
  double of_step;
  double of_compute;
};
BubbleForms bubble_forms(ScheduleKind kind, int pp, int vpp, int micro_batches,
                         int weight_delay = kPaperWeightDelay);

// bubble_forms' of_step as a formula, for reports: "(p-1)/(m+p-1)", "(p-1)/(V*m+p-1)"
// (interleaved), "(p-1)/(3m+p-1)" (zb-h1) or "(p-1)/(6m+p-1)" (zb-v, with T_F = T_B = T_W).
const char* bubble_formula_text(ScheduleKind kind);
// Whether ZB-H1 runs below the paper's delays (kind zb-h1, weight_delay < PP - 1).
bool weight_delay_capped(ScheduleKind kind, int pp, int weight_delay);
// What a lowered delay does, for reports: "each block's W inside its B, as 1f1b runs it",
// "each W right after its own B", or "its W at most d micro-batches late (rank r min(r, d))".
std::string weight_delay_text(int weight_delay);

// The bubble as tetra reports it everywhere (plan, plot, step line, metrics, sweep, lab):
// the idle share of the step, of_step.
double bubble_formula(ScheduleKind kind, int pp, int vpp, int micro_batches,
                      int weight_delay = kPaperWeightDelay);

struct TimedAction {
  Action action;
  double start;
  double end;
};

struct SimResult {
  double makespan = 0;             // end of the last action on any rank
  std::vector<double> busy;        // per rank: compute time
  std::vector<double> idle;        // per rank: makespan - busy
  std::vector<int> max_in_flight;  // per rank: most forwards done with backward (its W where
                                   // split) not done (0 under ForwardOnly, which keeps none)
  bool deadlock = false;           // some rank could not run its next action, ever
  bool in_order = true;            // every link carries its messages (both kinds) in receive order
  std::string order_problem;       // else the first link that does not, and how
  std::vector<std::vector<TimedAction>> timeline;  // per rank: what ran, when
  // The bubble as tetra reports it: each rank's idle share of the step, averaged over the
  // ranks (equal on every rank when the costs are; bubble_formula's then).
  double bubble() const;
};

// What one pass of one model chunk costs (any unit: the executor measures milliseconds).
// Where the schedule does not split the backward, B is charged b + w.
struct PassCosts {
  double f = 1, b = 1, w = 1;
};

// All PP ranks run make_schedule(kind, ..., mode) with model chunk k's passes costing
// costs[k] (PP V entries, model chunk order; chunk_rank says where each runs) and zero
// communication time; each action starts as soon as its rank is free and its input exists
// (W: its own B). A deadlock is reported (deadlock = true, timeline holds what ran), not
// thrown.
SimResult simulate(ScheduleKind kind, int pp, int vpp, int micro_batches,
                   const std::vector<PassCosts>& costs, ScheduleMode mode = ScheduleMode::Train,
                   int weight_delay = kPaperWeightDelay);
// The same with every chunk's forward costing tf, input-gradient pass tb and weight-gradient
// pass tw.
SimResult simulate(ScheduleKind kind, int pp, int vpp, int micro_batches, double tf, double tb,
                   ScheduleMode mode = ScheduleMode::Train, double tw = 0,
                   int weight_delay = kPaperWeightDelay);

// The same for arbitrary per-rank lists (ranks.size() = PP) with the chunks placed by
// `placement`, which split the backward when any holds a W. Throws tetra::Error when a list is
// not a permutation of F and B (and W where split; ForwardOnly: of F alone) of every
// (micro-batch < m, chunk < V), or when costs has not PP V entries or one is negative.
SimResult simulate(const std::vector<std::vector<Action>>& ranks, int vpp, int micro_batches,
                   const std::vector<PassCosts>& costs, ScheduleMode mode = ScheduleMode::Train,
                   Placement placement = Placement::Looped);
SimResult simulate(const std::vector<std::vector<Action>>& ranks, int vpp, int micro_batches,
                   double tf, double tb, ScheduleMode mode = ScheduleMode::Train, double tw = 0,
                   Placement placement = Placement::Looped);

// Why the lists of a schedule `kind` (one per pipeline rank, PP = ranks.size()) cannot run,
// found by simulating them before anything runs: a list that is not F and B of every
// (micro-batch, own chunk) exactly once, a deadlock (where each stuck rank stops, and what it
// waits for), a link of a looped schedule that carries its messages out of the order its
// receiver takes them, or a
// rank holding more activations at once than kind's max_in_flight_bound. "" when they can run.
// The second form checks make_schedule's own lists: tetra lab --check grades the pp_1f1b_order
// exercise with it.
std::string schedule_problem(const std::vector<std::vector<Action>>& ranks, ScheduleKind kind,
                             int vpp, int micro_batches);
std::string schedule_problem(ScheduleKind kind, int pp, int vpp, int micro_batches);

// "F0.0 F1.0 B0.0 W0.0 ..." (F<micro-batch>.<chunk>), for messages and debugging.
std::string to_string(const std::vector<Action>& actions);

}  // namespace tetra
