// Suggestion latency of Sextant's samplers: the time of one Ask() given a history of N
// completed observations of a 10-D function (a shifted Ackley on [-5,5]^10, at uniformly random
// points). Each repetition builds a fresh sampler (seed = repetition) and asks for trial N, so
// nothing is carried over between repetitions: the figure is the cold cost of one suggestion,
// construction included. One untimed warm-up per point. Prints one JSON object per line:
//   {"tool": "sextant", "sampler", "n", "dim", "reps", "median_ms", "p95_ms", "min_ms", "max_ms",
//    "cpu_median_ms", "cpu_p95_ms", "note"}   (wall-clock, and this thread's CPU time)
//
//   sampler_latency [--samplers bayesian,tpe] [--n 50,100,200,500] [--dim 10] [--reps 30]
//                   [--max-seconds 20]
// --max-seconds bounds the time spent on one (sampler, n) point: repetitions stop after it
// (at least 5 are always done). `random` and `sobol` are accepted too, as a floor.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

struct Flags {
  std::vector<std::string> samplers = {"bayesian", "tpe"};
  std::vector<int> ns = {50, 100, 200, 500};
  int dim = 10;
  int reps = 30;
  double max_seconds = 20;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "sampler_latency: %s\nusage: sampler_latency [--samplers a,b] [--n 50,100] "
               "[--dim 10] [--reps 30] [--max-seconds 20]\n",
               why.c_str());
  std::exit(2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string key = argv[i], value;
    const size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      Usage(key + " needs a value");
    }
    if (key == "--samplers") {
      f.samplers = absl::StrSplit(value, ',', absl::SkipEmpty());
    } else if (key == "--n") {
      f.ns.clear();
      for (absl::string_view s : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        f.ns.push_back(std::atoi(std::string(s).c_str()));
        if (f.ns.back() < 0) Usage("--n: negative");
      }
    } else if (key == "--dim") {
      f.dim = std::atoi(value.c_str());
    } else if (key == "--reps") {
      f.reps = std::atoi(value.c_str());
    } else if (key == "--max-seconds") {
      f.max_seconds = std::atof(value.c_str());
    } else {
      Usage("unknown flag " + key);
    }
  }
  if (f.dim < 1 || f.reps < 1) Usage("--dim and --reps must be >= 1");
  return f;
}

std::unique_ptr<Sampler> Make(const std::string& name, const SearchSpace& space, uint64_t seed) {
  if (name == "random") return NewRandomSampler(space, seed);
  if (name == "sobol") return NewSobolSampler(space, seed);
#ifdef SEXTANT_HPO_HAVE_BAYESIAN
  if (name == "bayesian") {
    BayesianOptions o;
    o.seed = seed;
    return NewBayesianSampler(space, o);
  }
#endif
#ifdef SEXTANT_HPO_HAVE_TPE
  if (name == "tpe") {
    TpeOptions o;
    o.seed = seed;
    return NewTpeSampler(space, o);
  }
#endif
  if (name == "bayesian" || name == "tpe") {
    std::fprintf(stderr,
                 "sampler_latency: built without %s (strategies/%s_sampler.cc was not in "
                 "sextant_strategies at configure time); re-run cmake once it is\n",
                 name.c_str(), name.c_str());
    std::exit(3);
  }
  Usage("unknown sampler " + name);
}

// Shifted Ackley in dim dimensions; the shift keeps the minimum off the centre of the box.
double Ackley(const std::vector<double>& x) {
  const double n = static_cast<double>(x.size()), pi = std::numbers::pi;
  double sq = 0, cs = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double z = x[i] - (1.3 - 0.37 * static_cast<double>(i % 7));
    sq += z * z;
    cs += std::cos(2 * pi * z);
  }
  return -20 * std::exp(-0.2 * std::sqrt(sq / n)) - std::exp(cs / n) + 20 + std::numbers::e;
}

// CPU time of this thread, in ms: unlike wall time, not inflated when the machine is shared.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  SearchSpace space;
  for (int d = 0; d < flags.dim; ++d) {
    ParamSpec spec;
    spec.name = absl::StrCat("x", d);
    spec.min = -5;
    spec.max = 5;
    space.params.push_back(spec);
  }
  // One history; each N takes its first N observations.
  const int max_n = *std::max_element(flags.ns.begin(), flags.ns.end());
  std::mt19937_64 rng(20240611);
  std::uniform_real_distribution<double> uniform(-5.0, 5.0);
  std::vector<Observation> history(max_n);
  for (Observation& o : history) {
    std::vector<double> x(flags.dim);
    for (int d = 0; d < flags.dim; ++d) {
      x[d] = uniform(rng);
      o.params[space.params[d].name] = x[d];
    }
    o.outcome = Observation::Outcome::kCompleted;
    o.value = Ackley(x);
  }

  for (const std::string& name : flags.samplers) {
    for (int n : flags.ns) {
      std::vector<double> ms, cpu;
      std::string note;
      const auto start = std::chrono::steady_clock::now();
      for (int rep = -1; rep < flags.reps; ++rep) {  // rep -1: untimed warm-up
        std::vector<std::string> notes;
        SampleRequest request;
        request.trial_number = n;
        request.history = absl::MakeConstSpan(history.data(), n);
        request.notes = &notes;
        const double c0 = ThreadCpuMs();
        const auto t0 = std::chrono::steady_clock::now();
        std::unique_ptr<Sampler> sampler = Make(name, space, static_cast<uint64_t>(rep + 2));
        absl::StatusOr<Params> params = sampler->Ask(request);
        const auto t1 = std::chrono::steady_clock::now();
        const double c1 = ThreadCpuMs();
        if (!params.ok()) {
          std::fprintf(stderr, "sampler_latency: %s at n=%d: %s\n", name.c_str(), n,
                       params.status().ToString().c_str());
          return 1;
        }
        if (params->size() != static_cast<size_t>(flags.dim)) {
          std::fprintf(stderr, "sampler_latency: %s returned %zu of %d parameters\n", name.c_str(),
                       params->size(), flags.dim);
          return 1;
        }
        if (rep < 0) {
          for (const std::string& s : notes) note += (note.empty() ? "" : "; ") + s;
          continue;
        }
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        cpu.push_back(c1 - c0);
        const double spent = std::chrono::duration<double>(t1 - start).count();
        if (ms.size() >= 5 && spent > flags.max_seconds) break;
      }
      std::printf(
          "{\"tool\": \"sextant\", \"sampler\": \"%s\", \"n\": %d, \"dim\": %d, \"reps\": %zu, "
          "\"median_ms\": %.6g, \"p95_ms\": %.6g, \"min_ms\": %.6g, \"max_ms\": %.6g, "
          "\"cpu_median_ms\": %.6g, \"cpu_p95_ms\": %.6g, \"note\": %s}\n",
          name.c_str(), n, flags.dim, ms.size(), Quantile(ms, 0.5), Quantile(ms, 0.95),
          *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end()),
          Quantile(cpu, 0.5), Quantile(cpu, 0.95), JsonString(note).c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace sextant

int main(int argc, char** argv) { return sextant::Main(argc, argv); }
