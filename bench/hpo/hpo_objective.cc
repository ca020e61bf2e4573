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
#include <cmath>
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
};

struct Problem {
  const char* name;
  double optimum;
  std::vector<Param> params;
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
    out += std::string("{\"name\": \"") + p.name + "\", \"optimum\": " + buf + ", \"params\": [";
    for (size_t i = 0; i < p.params.size(); ++i) {
      const Param& q = p.params[i];
      if (i) out += ", ";
      out += std::string("{\"name\": \"") + q.name + "\", \"type\": \"" + q.type + "\"";
      if (q.values.empty()) {
        std::snprintf(buf, sizeof buf, ", \"min\": %.17g, \"max\": %.17g}", q.min, q.max);
        out += buf;
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

}  // namespace

int main(int argc, char** argv) {
  std::string problem;
  double shift = 0;
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
  const std::string name = p->name;
  double loss = name == "branin"       ? Branin(args)
                : name == "hartmann6"  ? Hartmann6(args)
                : name == "rosenbrock" ? Rosenbrock(args)
                : name == "ackley"     ? Ackley(args)
                : name == "mixed6"     ? Mixed6(args)
                                       : Mixed(args);
  std::printf("loss=%.17g\n", loss);
  return 0;
}
