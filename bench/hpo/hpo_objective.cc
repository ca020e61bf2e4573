// The objective both sides of the HPO benchmark evaluate (bench/hpo/run.sh): Sextant runs it as
// trial.command, the Optuna peer through subprocess. One process per evaluation, as a real
// training script would be.
//
//   hpo_objective --problem NAME --x0=V --x1=V ...   prints "loss=<value>" (17 digits)
//   hpo_objective --problem NAME --shift F ...        the same problem with its inputs moved:
//                                                     each float or int parameter is evaluated
//                                                     at x + F * (max - min) (ints: rounded),
//                                                     so the minimiser moves by -F * range and
//                                                     the minimum keeps its value while the
//                                                     moved minimiser stays in the box (the
//                                                     warm-start benchmark's earlier runs,
//                                                     bench/warmstart/run.sh)
//   hpo_objective --problem NAME --seed S ...         a noisy problem's noise stream (cat6): the
//                                                     search's seed; 0 when not given
//   hpo_objective --list                              prints the problems as JSON (name,
//                                                     optimum, parameters), which the driver
//                                                     reads so that the domains live here only
//
// Problems (all minimised; `optimum` is the known global minimum used for simple regret):
//   branin      x0 in [-5,10], x1 in [0,15]                        optimum 0.397887(3577)
//   hartmann6   x0..x5 in [0,1]                                    optimum -3.32237(3680114)
//   rosenbrock  x0..x3 in [-2,2] (minimum at (1,1,1,1))            optimum 0
//   ackley      x0..x4 in [-5,5], shifted: minimum at kAckleyShift optimum 0
//                (not the centre of the box, nor any dyadic point)
//   mixed       x0, x1 floats in [-5,5], n int in [0,10], c categorical {red,green,blue,gray}:
//               (x0-1.7)^2 + (x1+0.8)^2 + 0.3 (n-7)^2 + offset(c),
//               offsets red 0.8, green 0, blue 0.35, gray 1.5    optimum 0 at (1.7,-0.8,7,green)
//   mixed6      mixed with a third float x2 in [-5,5] and a second int m in [1,20]:
//               mixed + 0.5 (x2-2.3)^2 + 0.05 (m-13)^2          optimum 0 at x2 = 2.3, m = 13
//   cat6        six categoricals c0..c5 with the values {a,b,c,d,e}, noisy: a main effect per
//               parameter plus an interaction in each pair (c0,c1), (c2,c3), (c4,c5), tables
//               in kCat6Main / kCat6Pair, plus Gaussian noise of sd kCat6Noise drawn from a
//               hash of (--seed, the configuration): the same configuration in the same search
//               gives the same noisy value, as a training run with a fixed seed would.
//               Prints loss= (noisy) and true_loss= (noiseless); the optimum (of the noiseless
//               function, by enumeration of the 15625 configurations) is e,b,c,a,d,c.
//   ordinal     mixed categorical with ordered grids, noiseless: depth int in [2,12], width int
//               in [16,256] step 16, drop float in [0,0.5] step 0.05, and categoricals opt
//               {sgd,adam,rmsprop,adagrad}, act {relu,tanh,gelu}, norm {none,batch,layer};
//               the best depth and width depend on opt and act (see Ordinal), and norm
//               interacts with opt. Optimum by enumeration (69696 configurations).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numbers>
#include <string>
#include <vector>

namespace {

struct Param {
  std::string name;
  const char* type;  // "float" | "int" | "categorical"
  double min = 0, max = 1;
  std::vector<std::string> values;  // categorical
  double step = 0;                  // float and int: values min + k * step; 0 = none
};

struct Problem {
  const char* name;
  double optimum;
  std::vector<Param> params;
  double noise = 0;  // sd of the seeded noise on loss= (true_loss= is printed beside it)
};

using Args = std::map<std::string, std::string>;

std::vector<Param> Floats(int n, double lo, double hi) {
  std::vector<Param> out;
  for (int i = 0; i < n; ++i) {
    std::string name = "x";
    name += std::to_string(i);
    out.push_back({name, "float", lo, hi, {}});
  }
  return out;
}

const std::vector<std::string> kColours = {"red", "green", "blue", "gray"};
const double kColourOffset[] = {0.8, 0.0, 0.35, 1.5};
const double kAckleyShift[] = {1.283, -2.417, 0.659, 3.142, -1.871};


const std::vector<std::string> kLetters = {"a", "b", "c", "d", "e"};
// cat6's main effects (row: parameter, column: value) and pair interactions (row: the first
// parameter of the pair's value, column: the second's). Chosen so that no parameter can be
// set alone: each pair's best combination is not the pair of best main effects.
const double kCat6Main[6][5] = {{0.9, 0.6, 0.7, 0.8, 0.1},  {0.5, 0.2, 0.9, 0.0, 0.6},
                                {0.3, 0.8, 0.1, 0.6, 0.5},  {0.2, 0.7, 0.4, 0.9, 0.0},
                                {0.8, 0.4, 0.6, 0.3, 0.5},  {0.6, 0.9, 0.0, 0.4, 0.7}};
const double kCat6Pair[3][5][5] = {
    {{0.6, 0.9, 0.3, 0.5, 0.8},
     {0.4, 0.7, 0.8, 0.2, 0.6},
     {0.9, 0.1, 0.5, 0.7, 0.3},
     {0.2, 0.8, 0.6, 0.9, 0.4},
     {0.7, 0.0, 0.6, 0.5, 0.9}},
    {{0.8, 0.2, 0.7, 0.4, 0.9},
     {0.5, 0.9, 0.3, 0.8, 0.1},
     {0.0, 0.6, 0.9, 0.3, 0.7},
     {0.6, 0.4, 0.2, 0.9, 0.5},
     {0.3, 0.8, 0.5, 0.1, 0.6}},
    {{0.7, 0.5, 0.9, 0.2, 0.6},
     {0.9, 0.3, 0.6, 0.8, 0.4},
     {0.4, 0.8, 0.7, 0.5, 0.1},
     {0.5, 0.2, 0.0, 0.6, 0.9},
     {0.8, 0.6, 0.4, 0.9, 0.3}}};
constexpr double kCat6Noise = 0.5;

const std::vector<std::string> kOptimisers = {"sgd", "adam", "rmsprop", "adagrad"};
const std::vector<std::string> kActivations = {"relu", "tanh", "gelu"};
const std::vector<std::string> kNorms = {"none", "batch", "layer"};

double Cat6Noiseless(const int c[6]) {
  double f = 0;
  for (int i = 0; i < 6; ++i) f += kCat6Main[i][c[i]];
  for (int p = 0; p < 3; ++p) f += kCat6Pair[p][c[2 * p]][c[2 * p + 1]];
  return f;
}

double OrdinalNoiseless(double depth, double width, double drop, int opt, int act, int norm) {
  static const double best_depth[4] = {9, 5, 7, 4};         // by optimiser
  static const double best_width[3] = {176, 96, 224};       // by activation
  static const double opt_offset[4] = {0.35, 0.05, 0.0, 0.6};
  static const double act_offset[3] = {0.1, 0.4, 0.0};
  static const double norm_offset[4][3] = {{0.5, 0.0, 0.3},  // sgd wants batch norm,
                                           {0.3, 0.4, 0.0},  // adam layer norm,
                                           {0.2, 0.3, 0.25}, // rmsprop none,
                                           {0.0, 0.4, 0.4}};
  const double dd = depth - best_depth[opt], dw = (width - best_width[act]) / 48;
  const double dr = drop - (norm == 0 ? 0.3 : 0.1);
  return 0.06 * dd * dd + 0.5 * dw * dw + 8 * dr * dr + opt_offset[opt] + act_offset[act] +
         norm_offset[opt][norm];
}

double Cat6Optimum() {
  double best = 1e300;
  int c[6];
  for (int k = 0; k < 15625; ++k) {
    for (int i = 0, r = k; i < 6; ++i, r /= 5) c[i] = r % 5;
    best = std::min(best, Cat6Noiseless(c));
  }
  return best;
}

double OrdinalOptimum() {
  double best = 1e300;
  for (int depth = 2; depth <= 12; ++depth)
    for (int width = 16; width <= 256; width += 16)
      for (int d = 0; d <= 10; ++d)
        for (int opt = 0; opt < 4; ++opt)
          for (int act = 0; act < 3; ++act)
            for (int norm = 0; norm < 3; ++norm)
              best = std::min(best, OrdinalNoiseless(depth, width, 0.05 * d, opt, act, norm));
  return best;
}

std::vector<Param> Cat6Params() {
  std::vector<Param> out;
  for (int i = 0; i < 6; ++i) {
    std::string name = "c";
    name += std::to_string(i);
    out.push_back({name, "categorical", 0, 0, kLetters});
  }
  return out;
}

const std::vector<Problem>& Problems() {
  static const std::vector<Problem> problems = [] {
    std::vector<Problem> p;
    p.push_back(
        {"branin", 0.39788735772973816, {{"x0", "float", -5, 10, {}}, {"x1", "float", 0, 15, {}}}});
    p.push_back({"hartmann6", -3.322368011415515, Floats(6, 0, 1)});
    p.push_back({"rosenbrock", 0.0, Floats(4, -2, 2)});
    p.push_back({"ackley", 0.0, Floats(5, -5, 5)});
    std::vector<Param> mixed = Floats(2, -5, 5);
    mixed.push_back({"n", "int", 0, 10, {}});
    mixed.push_back({"c", "categorical", 0, 0, kColours});
    p.push_back({"mixed", 0.0, mixed});
    std::vector<Param> mixed6 = Floats(3, -5, 5);
    mixed6.push_back({"n", "int", 0, 10, {}});
    mixed6.push_back({"m", "int", 1, 20, {}});
    mixed6.push_back({"c", "categorical", 0, 0, kColours});
    p.push_back({"mixed6", 0.0, mixed6});
    p.push_back({"cat6", Cat6Optimum(), Cat6Params(), kCat6Noise});
    p.push_back({"ordinal",
                 OrdinalOptimum(),
                 {{"depth", "int", 2, 12, {}},
                  {"width", "int", 16, 256, {}, 16},
                  {"drop", "float", 0, 0.5, {}, 0.05},
                  {"opt", "categorical", 0, 0, kOptimisers},
                  {"act", "categorical", 0, 0, kActivations},
                  {"norm", "categorical", 0, 0, kNorms}}});
    return p;
  }();
  return problems;
}

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "hpo_objective: %s\n", message.c_str());
  std::exit(2);
}

double Number(const Args& args, const std::string& name) {
  auto it = args.find(name);
  if (it == args.end()) Fail("missing --" + name);
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || !std::isfinite(v)) {
    Fail("--" + name + ": not a number: '" + it->second + "'");
  }
  return v;
}

std::vector<double> Vector(const Args& args, int n) {
  std::vector<double> x(n);
  for (int i = 0; i < n; ++i) {
    std::string name = "x";
    name += std::to_string(i);
    x[i] = Number(args, name);
  }
  return x;
}

double Branin(const Args& a) {
  const double x0 = Number(a, "x0"), x1 = Number(a, "x1");
  const double pi = std::numbers::pi;
  const double b = 5.1 / (4 * pi * pi), c = 5 / pi, t = 1 / (8 * pi);
  const double q = x1 - b * x0 * x0 + c * x0 - 6;
  return q * q + 10 * (1 - t) * std::cos(x0) + 10;
}

double Hartmann6(const Args& a) {
  static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
  static const double A[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                 {0.05, 10, 17, 0.1, 8, 14},
                                 {3, 3.5, 1.7, 10, 17, 8},
                                 {17, 8, 0.05, 10, 0.1, 14}};
  static const double P[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                 {2329, 4135, 8307, 3736, 1004, 9991},
                                 {2348, 1451, 3522, 2883, 3047, 6650},
                                 {4047, 8828, 8732, 5743, 1091, 381}};
  const std::vector<double> x = Vector(a, 6);
  double f = 0;
  for (int i = 0; i < 4; ++i) {
    double s = 0;
    for (int j = 0; j < 6; ++j) {
      const double d = x[j] - 1e-4 * P[i][j];
      s += A[i][j] * d * d;
    }
    f -= alpha[i] * std::exp(-s);
  }
  return f;
}

double Rosenbrock(const Args& a) {
  const std::vector<double> x = Vector(a, 4);
  double f = 0;
  for (int i = 0; i + 1 < 4; ++i) {
    const double u = x[i + 1] - x[i] * x[i], v = 1 - x[i];
    f += 100 * u * u + v * v;
  }
  return f;
}

double Ackley(const Args& a) {
  const std::vector<double> x = Vector(a, 5);
  const double n = 5, pi = std::numbers::pi;
  double sq = 0, cs = 0;
  for (int i = 0; i < 5; ++i) {
    const double z = x[i] - kAckleyShift[i];
    sq += z * z;
    cs += std::cos(2 * pi * z);
  }
  return -20 * std::exp(-0.2 * std::sqrt(sq / n)) - std::exp(cs / n) + 20 + std::numbers::e;
}

double Mixed(const Args& a) {
  const double x0 = Number(a, "x0"), x1 = Number(a, "x1"), n = Number(a, "n");
  if (n != std::floor(n)) Fail("--n: not an integer");
  auto it = a.find("c");
  if (it == a.end()) Fail("missing --c");
  double offset = -1;
  for (size_t i = 0; i < kColours.size(); ++i) {
    if (it->second == kColours[i]) offset = kColourOffset[i];
  }
  if (offset < 0) Fail("--c: unknown value '" + it->second + "'");
  return (x0 - 1.7) * (x0 - 1.7) + (x1 + 0.8) * (x1 + 0.8) + 0.3 * (n - 7) * (n - 7) + offset;
}

double Mixed6(const Args& a) {
  const double x2 = Number(a, "x2"), m = Number(a, "m");
  if (m != std::floor(m)) Fail("--m: not an integer");
  Args four = a;
  four.erase("x2");
  four.erase("m");
  return Mixed(four) + 0.5 * (x2 - 2.3) * (x2 - 2.3) + 0.05 * (m - 13) * (m - 13);
}

// The index of a categorical's value, or a usage failure.
int ValueIndex(const Args& a, const std::string& name, const std::vector<std::string>& values) {
  auto it = a.find(name);
  if (it == a.end()) Fail("missing --" + name);
  for (size_t i = 0; i < values.size(); ++i) {
    if (it->second == values[i]) return static_cast<int>(i);
  }
  Fail("--" + name + ": unknown value '" + it->second + "'");
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A standard normal draw that is a function of (seed, key) alone (Box-Muller).
double SeededNormal(uint64_t seed, uint64_t key) {
  const uint64_t a = SplitMix(SplitMix(seed) ^ key), b = SplitMix(a);
  const double u1 = (static_cast<double>(a >> 11) + 1) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

struct Loss {
  double value;       // what the search sees
  double noiseless;   // what the regret is measured on
};

Loss Cat6(const Args& a, uint64_t seed) {
  int c[6];
  uint64_t key = 0;
  for (int i = 0; i < 6; ++i) {
    std::string name = "c";
    name += std::to_string(i);
    c[i] = ValueIndex(a, name, kLetters);
    key = key * 5 + static_cast<uint64_t>(c[i]);
  }
  const double f = Cat6Noiseless(c);
  return {f + kCat6Noise * SeededNormal(seed, key), f};
}

double Ordinal(const Args& a) {
  const double depth = Number(a, "depth"), width = Number(a, "width"), drop = Number(a, "drop");
  if (depth != std::floor(depth)) Fail("--depth: not an integer");
  if (width != std::floor(width) || std::fmod(width - 16, 16) != 0) {
    Fail("--width: not on the grid 16, 32, ..., 256");
  }
  const double k = drop / 0.05;
  if (std::abs(k - std::round(k)) > 1e-6) Fail("--drop: not on the grid 0, 0.05, ..., 0.5");
  return OrdinalNoiseless(depth, width, 0.05 * std::round(k), ValueIndex(a, "opt", kOptimisers),
                          ValueIndex(a, "act", kActivations), ValueIndex(a, "norm", kNorms));
}

// Moves every numeric input by shift times its parameter's range (see --shift).
void Shift(const Problem& p, double shift, Args& args) {
  for (const Param& q : p.params) {
    if (q.values.size() > 0) continue;
    const auto it = args.find(q.name);
    if (it == args.end()) continue;
    double delta = shift * (q.max - q.min);
    if (std::string(q.type) == "int") delta = std::round(delta);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", Number(args, q.name) + delta);
    it->second = buf;
  }
}

void List() {
  std::string out = "[";
  for (const Problem& p : Problems()) {
    if (out.size() > 1) out += ",\n ";
    char buf[128];
    std::snprintf(buf, sizeof buf, "%.17g", p.optimum);
    out += std::string("{\"name\": \"") + p.name + "\", \"optimum\": " + buf;
    if (p.noise > 0) {
      std::snprintf(buf, sizeof buf, ", \"noise\": %.17g", p.noise);
      out += buf;
    }
    out += ", \"params\": [";
    for (size_t i = 0; i < p.params.size(); ++i) {
      const Param& q = p.params[i];
      if (i) out += ", ";
      out += std::string("{\"name\": \"") + q.name + "\", \"type\": \"" + q.type + "\"";
      if (q.values.empty()) {
        std::snprintf(buf, sizeof buf, ", \"min\": %.17g, \"max\": %.17g", q.min, q.max);
        out += buf;
        if (q.step > 0) {
          std::snprintf(buf, sizeof buf, ", \"step\": %.17g", q.step);
          out += buf;
        }
        out += "}";
      } else {
        out += ", \"values\": [";
        for (size_t k = 0; k < q.values.size(); ++k) {
          out += std::string(k ? ", " : "") + "\"" + q.values[k] + "\"";
        }
        out += "]}";
      }
    }
    out += "]}";
  }
  std::printf("%s]\n", out.c_str());
}

// The loss of one evaluation of p at args (already shifted); seed feeds a noisy problem's noise.
Loss Evaluate(const Problem& p, const Args& args, uint64_t seed) {
  const std::string name = p.name;
  if (name == "cat6") return Cat6(args, seed);
  const double loss = name == "branin"       ? Branin(args)
                      : name == "hartmann6"  ? Hartmann6(args)
                      : name == "rosenbrock" ? Rosenbrock(args)
                      : name == "ackley"     ? Ackley(args)
                      : name == "mixed6"     ? Mixed6(args)
                      : name == "ordinal"    ? Ordinal(args)
                                             : Mixed(args);
  return {loss, loss};
}

}  // namespace

// hpo_sim.cc includes this file for the problems, with HPO_OBJECTIVE_NO_MAIN defined.
#ifndef HPO_OBJECTIVE_NO_MAIN
int main(int argc, char** argv) {
  std::string problem;
  double shift = 0;
  uint64_t seed = 0;
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--list") {
      List();
      return 0;
    }
    if (arg.rfind("--", 0) != 0) Fail("unexpected argument '" + arg + "'");
    std::string key = arg.substr(2), value;
    const size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      Fail("--" + key + " needs a value");
    }
    if (key == "problem") {
      problem = value;
    } else if (key == "seed") {
      char* end = nullptr;
      seed = std::strtoull(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0') Fail("--seed: not an integer: '" + value + "'");
    } else if (key == "shift") {
      char* end = nullptr;
      shift = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !std::isfinite(shift)) {
        Fail("--shift: not a number: '" + value + "'");
      }
    } else if (!args.emplace(key, value).second) {
      Fail("--" + key + " given twice");
    }
  }
  const Problem* p = nullptr;
  for (const Problem& q : Problems()) {
    if (problem == q.name) p = &q;
  }
  if (p == nullptr) Fail("--problem: unknown problem '" + problem + "' (see --list)");
  for (const auto& [key, value] : args) {
    bool known = false;
    for (const Param& q : p->params) known = known || q.name == key;
    if (!known) Fail("unknown parameter --" + key + " for " + problem);
  }
  if (shift != 0) Shift(*p, shift, args);
  const Loss loss = Evaluate(*p, args, seed);
  if (p->noise > 0) {
    std::printf("loss=%.17g true_loss=%.17g\n", loss.value, loss.noiseless);
  } else {
    std::printf("loss=%.17g\n", loss.value);
  }
  return 0;
}
#endif  // HPO_OBJECTIVE_NO_MAIN
