#include "tests/orchestrator/report/report_test_support.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "orchestrator/core/store.h"
#include "tests/orchestrator/test_util.h"

namespace sextant::testing {
namespace {

std::string SpecYaml(const SyntheticRunOptions& o) {
  std::string odd =
      o.odd_category.empty() ? "" : absl::StrCat("      - \"", o.odd_category, "\"\n");
  return absl::StrCat("name: ", o.name, R"(
objective: {metric: loss, goal: minimize}
parameters:
  lr: {type: float, min: 1.0e-4, max: 1.0, log: true}
  width: {type: int, min: 1, max: 8}
  opt:
    type: categorical
    values:
      - sgd
      - adam
)",
                      odd, R"(  dropout: {type: float, min: 0, max: 0.5}
search:
  sampler: random
  scheduler: asha
  fidelity: {name: epoch, min: 1, max: 27, reduction_factor: 3}
  seed: 1
  max_trials: )",
                      o.trials, "\n  max_concurrent: ", o.workers, R"(
trial:
  command: [sh, train.sh]
)");
}

void Check(const absl::Status& s) { ASSERT_TRUE(s.ok()) << s; }

}  // namespace

void BuildSyntheticRun(const std::string& dir, const SyntheticRunOptions& o) {
  std::filesystem::create_directories(dir);
  v1::ExperimentSpec spec = SpecFromYaml(SpecYaml(o));
  auto opened = Store::Open(dir + "/state.db", /*create=*/true);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  const double t0 = 1.7e9;
  Check(store.Begin());
  Check(store.PutMeta("spec", spec.SerializeAsString()));
  Check(store.PutMeta("started_at", absl::StrCat(static_cast<int64_t>(t0))));
  Check(store.SetRunState(o.state));
  for (int w = 1; w <= o.workers; ++w) {
    Check(store.AddWorker(w, "local", "local", "host", 1000 + w, t0));
    Check(store.AddEvent(t0, "worker_registered", 0, absl::StrCat("worker ", w)));
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> free_at(o.workers, t0);
  const int categories = 2 + (o.odd_category.empty() ? 0 : 1);
  const std::vector<std::string> cats = {"sgd", "adam", o.odd_category};
  struct Plan {
    nlohmann::json params;
    double floor;
  };
  std::vector<Plan> plans;
  for (int i = 0; i < o.trials; ++i) {
    double lr = std::pow(10.0, -4 + 4 * u(rng));
    int width = 1 + static_cast<int>(u(rng) * 8) % 8;
    int opt = static_cast<int>(u(rng) * categories) % categories;
    double dropout = 0.5 * u(rng);
    double l = std::log10(lr) + 2.5;
    double floor = 0.1 + 0.05 * l * l + 0.2 / width + 0.1 * dropout + (opt == 0 ? 0.05 : 0);
    plans.push_back(
        Plan{{{"lr", lr}, {"width", width}, {"opt", cats[opt]}, {"dropout", dropout}}, floor});
  }
  std::vector<double> sorted;
  for (const Plan& p : plans) sorted.push_back(p.floor);
  std::sort(sorted.begin(), sorted.end());
  const int running_from = o.state == v1::RUN_RUNNING ? o.trials - o.workers : o.trials;
  for (int i = 0; i < o.trials; ++i) {
    const Plan& p = plans[i];
    double q = static_cast<double>(std::lower_bound(sorted.begin(), sorted.end(), p.floor) -
                                   sorted.begin()) /
               o.trials;
    int stop = q < 0.12 ? 27 : q < 0.33 ? 9 : q < 0.6 ? 3 : 1;
    stop = std::min(stop, o.epochs);
    bool failed = o.all_failed || (i % 97 == 50);
    bool running = i >= running_from;
    TrialRow t;
    t.id = i + 1;
    t.params_json = p.params.dump();
    auto loss = [&](int e) { return p.floor + 1.0 / e + 0.01 * std::sin(i * 7.0 + e); };
    nlohmann::json rungs = nlohmann::json::array();
    int from = 0, attempt = 0;
    for (int rung : {1, 3, 9, 27}) {
      if (from >= stop) break;
      int to = std::min(rung, stop);
      int w = static_cast<int>(std::min_element(free_at.begin(), free_at.end()) - free_at.begin());
      double start = free_at[w];
      ++attempt;
      if (attempt == 1) t.created_at = start;
      Check(store.StartAttempt(t.id, attempt, w + 1, start));
      int seq = 0;
      for (int e = from + 1; e <= to; ++e) {
        nlohmann::json m = {{"epoch", e}, {"loss", loss(e)}};
        auto added =
            store.AddMeasurement(MeasurementRow{t.id, attempt, ++seq, 2.0 * (e - from), m.dump()});
        ASSERT_TRUE(added.ok());
      }
      double end = start + 2.0 * (to - from) + 0.5;
      free_at[w] = end;
      bool last = to == stop;
      if (running && last) break;  // the attempt is still open
      const v1::AttemptOutcome outcome = !last        ? v1::ATTEMPT_PAUSED
                                         : failed     ? v1::ATTEMPT_FAILED
                                         : stop == 27 ? v1::ATTEMPT_COMPLETED
                                                      : v1::ATTEMPT_PRUNED;
      Check(store.FinishAttempt(t.id, attempt, outcome, failed && last ? 1 : 0, "", end));
      if (!last) {
        rungs.push_back({{"fidelity", to},
                         {"value", loss(to)},
                         {"decision", "promoted"},
                         {"target", rung * 3}});
        Check(store.AddEvent(end, "trial_promoted", t.id, absl::StrCat("to epoch ", rung * 3)));
      } else if (!failed && stop < 27) {
        rungs.push_back({{"fidelity", to}, {"value", loss(to)}, {"decision", "pruned"}});
        Check(store.AddEvent(end, "trial_pruned", t.id, "below the top third"));
      }
      t.finished_at = last ? end : 0;
      from = to;
    }
    t.attempts = attempt;
    t.fidelity = stop;
    t.target = stop;
    t.rungs_json = rungs.dump();
    if (running) {
      t.state = v1::RUNNING;
      t.finished_at = 0;
    } else if (failed) {
      t.state = v1::FAILED;
      t.failures = 1;
      t.error = "exit 1: <oops> & \"quotes\"";
      Check(store.AddEvent(t.finished_at, "trial_failed", t.id, t.error));
    } else if (stop == 27) {
      t.state = v1::COMPLETED;
      t.value = loss(27);
    } else {
      t.state = v1::PRUNED;
    }
    Check(store.PutTrial(t));
  }
  if (o.state == v1::RUN_COMPLETED)
    Check(store.AddEvent(*std::max_element(free_at.begin(), free_at.end()), "run_finished", 0,
                         RunStateName(o.state)));
  Check(store.Commit());
}

namespace {

std::string ObjectivesYaml(const ObjectivesRunOptions& o) {
  std::string out = absl::StrCat("name: ", o.name, "\n");
  if (o.objectives == 1) {
    absl::StrAppend(&out, "objective: {metric: f1, goal: minimize}\n");
  } else {
    absl::StrAppend(&out, "objectives:\n");
    for (int k = 1; k <= o.objectives; ++k) {
      absl::StrAppend(&out, "  - {metric: f", k, ", goal: ", k == 2 ? "maximize" : "minimize",
                      "}\n");
    }
  }
  if (o.infeasible_every > 0) absl::StrAppend(&out, "constraints: [{metric: mem, max: 50}]\n");
  absl::StrAppend(&out, R"(parameters:
  a: {type: float, min: 0, max: 1}
  b: {type: float, min: 0, max: 1}
  c: {type: float, min: 0, max: 1}
search:
)");
  absl::StrAppend(&out, o.objectives > 1 ? "  sampler: nsga2\n" : "  sampler: bayesian\n");
  if (o.cost_aware) absl::StrAppend(&out, "  cost_aware: true\n");
  absl::StrAppend(&out, "  seed: 5\n  max_trials: ", o.trials, "\n  max_concurrent: 2\n",
                  "trial:\n  command: [sh, train.sh]\n");
  return out;
}

// ZDT1-like in (f1, f2) with f2 flipped to be maximised, and two more objectives in c.
std::vector<double> ObjectiveValues(int n, double a, double b, double c) {
  const double g = 1 + 4 * b;
  std::vector<double> v = {a, 10 - g * (1 - std::sqrt(a / g)), c + 0.5 * b, (1 - a) * (1 - c) + b};
  if (n == 1) return {(a - 0.3) * (a - 0.3) + 0.1 * b + 0.05 * c};
  v.resize(n);
  return v;
}

}  // namespace

void BuildObjectivesRun(const std::string& dir, const ObjectivesRunOptions& o) {
  std::filesystem::create_directories(dir);
  v1::ExperimentSpec spec = SpecFromYaml(ObjectivesYaml(o));
  auto opened = Store::Open(dir + "/state.db", /*create=*/true);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  const double t0 = 1.7e9;
  Check(store.Begin());
  Check(store.PutMeta("spec", spec.SerializeAsString()));
  Check(store.PutMeta("started_at", absl::StrCat(static_cast<int64_t>(t0))));
  Check(store.PutMeta("state", "COMPLETED"));
  for (int w = 1; w <= 2; ++w) Check(store.AddWorker(w, "local", "local", "host", 1000 + w, t0));
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  double free_at[2] = {t0, t0};
  std::vector<CostRow> costs;
  for (int i = 1; i <= o.trials; ++i) {
    const double a = u(rng), b = u(rng), c = u(rng);
    const int w = free_at[0] <= free_at[1] ? 0 : 1;
    const double seconds = 5 + 20 * a, start = free_at[w], end = start + seconds;
    free_at[w] = end;
    TrialRow t;
    t.id = i;
    t.params_json = nlohmann::json{{"a", a}, {"b", b}, {"c", c}}.dump();
    t.attempts = 1;
    t.created_at = start;
    t.finished_at = end;
    t.seconds = seconds;
    Check(store.StartAttempt(i, 1, w + 1, start));
    const bool failed = o.failed_every > 0 && i % o.failed_every == 0;
    const bool infeasible = o.infeasible_every > 0 && i % o.infeasible_every == 0;
    nlohmann::json m = {{"mem", infeasible ? 80.0 : 20.0}};
    if (failed) {
      t.state = v1::FAILED;
      t.failures = 1;
      t.error = "exited with status 1";
    } else {
      t.state = v1::COMPLETED;
      t.values = ObjectiveValues(o.objectives, a, b, c);
      t.value = t.values[0];
      if (o.objectives == 1) t.values.clear();  // one objective keeps `value` only
      t.feasible = !infeasible;
      std::vector<double> v = ObjectiveValues(o.objectives, a, b, c);
      for (size_t k = 0; k < v.size(); ++k) m[absl::StrCat("f", k + 1)] = v[k];
    }
    auto added = store.AddMeasurement(MeasurementRow{i, 1, 1, seconds, m.dump()});
    ASSERT_TRUE(added.ok());
    Check(store.FinishAttempt(i, 1, failed ? v1::ATTEMPT_FAILED : v1::ATTEMPT_COMPLETED,
                              failed ? 1 : 0, t.error, end));
    if (o.billed) {
      costs.push_back(CostRow{"trial", i, "", "", "", start - t0, end - t0, 0.01 * seconds});
    }
    Check(store.PutTrial(t));
  }
  if (o.billed) {
    for (int w = 0; w < 2; ++w) {
      costs.push_back(CostRow{"instance", w + 1, "gpu-spot", "east", "spot", 0, free_at[w] - t0,
                              0.01 * (free_at[w] - t0)});
    }
    Check(store.ReplaceCosts(costs));
  }
  Check(store.AddEvent(std::max(free_at[0], free_at[1]), "run_finished", 0, "COMPLETED"));
  Check(store.Commit());
}

// --- PNG ---------------------------------------------------------------------------------

namespace {

uint32_t Be32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) |
         (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
}

void PutBe32(std::string* s, uint32_t v) {
  for (int k = 3; k >= 0; --k) s->push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}

void Chunk(std::string* out, const char* type, const std::string& data) {
  PutBe32(out, static_cast<uint32_t>(data.size()));
  std::string body = std::string(type, 4) + data;
  out->append(body);
  PutBe32(out, static_cast<uint32_t>(
                   crc32(0, reinterpret_cast<const Bytef*>(body.data()), body.size())));
}

int Paeth(int a, int b, int c) {
  int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

}  // namespace

bool DecodePng(const std::string& bytes, Image* out, std::string* error) {
  if (bytes.size() < 8 || bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) {
    *error = "not a PNG";
    return false;
  }
  size_t at = 8;
  int depth = 0, colour = 0, interlace = 0;
  std::string idat;
  while (at + 8 <= bytes.size()) {
    uint32_t len = Be32(bytes, at);
    std::string type = bytes.substr(at + 4, 4);
    if (at + 12 + len > bytes.size()) break;
    if (type == "IHDR") {
      out->width = static_cast<int>(Be32(bytes, at + 8));
      out->height = static_cast<int>(Be32(bytes, at + 12));
      depth = uint8_t(bytes[at + 16]);
      colour = uint8_t(bytes[at + 17]);
      interlace = uint8_t(bytes[at + 20]);
    } else if (type == "IDAT") {
      idat.append(bytes, at + 8, len);
    }
    at += 12 + len;
  }
  if (depth != 8 || (colour != 2 && colour != 6) || interlace != 0) {
    *error = absl::StrCat("unsupported PNG: depth ", depth, " colour ", colour, " interlace ",
                          interlace);
    return false;
  }
  const int bpp = colour == 6 ? 4 : 3;
  const size_t stride = static_cast<size_t>(out->width) * bpp;
  std::vector<uint8_t> raw((stride + 1) * out->height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_len != raw.size()) {
    *error = "bad zlib stream";
    return false;
  }
  std::vector<uint8_t> img(stride * out->height);
  for (int y = 0; y < out->height; ++y) {
    uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* src = &raw[y * (stride + 1) + 1];
    uint8_t* row = &img[y * stride];
    const uint8_t* up = y ? &img[(y - 1) * stride] : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      int a = x >= static_cast<size_t>(bpp) ? row[x - bpp] : 0;
      int b = up ? up[x] : 0;
      int c = up && x >= static_cast<size_t>(bpp) ? up[x - bpp] : 0;
      int v = src[x];
      switch (filter) {
        case 1:
          v += a;
          break;
        case 2:
          v += b;
          break;
        case 3:
          v += (a + b) / 2;
          break;
        case 4:
          v += Paeth(a, b, c);
          break;
        default:
          break;
      }
      row[x] = static_cast<uint8_t>(v);
    }
  }
  out->rgba.resize(static_cast<size_t>(out->width) * out->height * 4);
  for (size_t p = 0; p < static_cast<size_t>(out->width) * out->height; ++p) {
    for (int k = 0; k < 3; ++k) out->rgba[p * 4 + k] = img[p * bpp + k];
    out->rgba[p * 4 + 3] = bpp == 4 ? img[p * 4 + 3] : 255;
  }
  return true;
}

std::string EncodePng(const Image& image) {
  std::string out = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  PutBe32(&ihdr, image.width);
  PutBe32(&ihdr, image.height);
  ihdr += std::string("\x08\x06\x00\x00\x00", 5);
  Chunk(&out, "IHDR", ihdr);
  std::string raw;
  for (int y = 0; y < image.height; ++y) {
    raw.push_back(0);
    raw.append(reinterpret_cast<const char*>(&image.rgba[static_cast<size_t>(y) * image.width * 4]),
               static_cast<size_t>(image.width) * 4);
  }
  uLongf len = compressBound(raw.size());
  std::string z(len, '\0');
  compress2(reinterpret_cast<Bytef*>(z.data()), &len, reinterpret_cast<const Bytef*>(raw.data()),
            raw.size(), 9);
  z.resize(len);
  Chunk(&out, "IDAT", z);
  Chunk(&out, "IEND", "");
  return out;
}

Image Crop(const Image& image, int x, int y, int w, int h) {
  Image out;
  x = std::clamp(x, 0, image.width);
  y = std::clamp(y, 0, image.height);
  out.width = std::clamp(w, 0, image.width - x);
  out.height = std::clamp(h, 0, image.height - y);
  out.rgba.resize(static_cast<size_t>(out.width) * out.height * 4);
  for (int r = 0; r < out.height; ++r) {
    std::memcpy(&out.rgba[static_cast<size_t>(r) * out.width * 4],
                &image.rgba[(static_cast<size_t>(y + r) * image.width + x) * 4],
                static_cast<size_t>(out.width) * 4);
  }
  return out;
}

double GreyVariance(const Image& image, int x, int y, int w, int h) {
  Image c = Crop(image, x, y, w, h);
  size_t n = static_cast<size_t>(c.width) * c.height;
  if (n == 0) return 0;
  double sum = 0, sq = 0;
  for (size_t p = 0; p < n; ++p) {
    double g = 0.299 * c.rgba[p * 4] + 0.587 * c.rgba[p * 4 + 1] + 0.114 * c.rgba[p * 4 + 2];
    sum += g;
    sq += g * g;
  }
  double mean = sum / n;
  return sq / n - mean * mean;
}

// --- Chromium ------------------------------------------------------------------------------

std::string ChromiumPath() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

namespace {

std::vector<std::string> ChromiumArgs(int width, int height) {
  return {ChromiumPath(),
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-dev-shm-usage",
          "--hide-scrollbars",
          "--no-first-run",
          "--disable-extensions",
          "--mute-audio",
          absl::StrCat("--user-data-dir=", MakeTempDir("chromium-profile")),
          "--enable-logging=stderr",
          "--v=0",
          absl::StrCat("--window-size=", width, ",", height)};
}

}  // namespace

BrowserRender DumpDom(const std::string& html_path, int width, int height) {
  return DumpDomUrl("file://" + std::filesystem::absolute(html_path).string(), width, height);
}

BrowserRender DumpDomUrl(const std::string& url, int width, int height, int virtual_time_ms) {
  std::vector<std::string> argv = ChromiumArgs(width, height);
  if (virtual_time_ms > 0) argv.push_back(absl::StrCat("--virtual-time-budget=", virtual_time_ms));
  argv.push_back("--dump-dom");
  argv.push_back(url);
  auto start = std::chrono::steady_clock::now();
  CommandOutput r = RunProcess(argv, 120);
  BrowserRender out;
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.exit_code = r.exit_code;
  out.dom = r.out;
  out.stderr_text = r.err;
  return out;
}

int Screenshot(const std::string& html_path, const std::string& png_path, int width, int height,
               std::string* log) {
  std::vector<std::string> argv = ChromiumArgs(width, height);
  argv.push_back("--screenshot=" + png_path);
  argv.push_back("file://" + std::filesystem::absolute(html_path).string());
  CommandOutput r = RunProcess(argv, 120);
  *log = r.err;
  return r.exit_code;
}

// --- HTML ----------------------------------------------------------------------------------

std::string UnescapeHtml(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string::npos) {
      out += s[i];
      continue;
    }
    std::string ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out += '&';
    else if (ent == "lt")
      out += '<';
    else if (ent == "gt")
      out += '>';
    else if (ent == "quot")
      out += '"';
    else if (ent == "#39")
      out += '\'';
    else
      out += s.substr(i, semi - i + 1);
    i = semi;
  }
  return out;
}

namespace {

std::string AttrInTag(const std::string& tag, const std::string& attr) {
  std::string needle = " " + attr + "=\"";
  size_t a = tag.find(needle);
  if (a == std::string::npos) return "";
  a += needle.size();
  size_t b = tag.find('"', a);
  return b == std::string::npos ? "" : UnescapeHtml(tag.substr(a, b - a));
}

}  // namespace

std::string AttributeOf(const std::string& html, const std::string& id, const std::string& attr) {
  size_t at = html.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  size_t open = html.rfind('<', at), close = html.find('>', at);
  if (open == std::string::npos || close == std::string::npos) return "";
  return AttrInTag(html.substr(open, close - open), attr);
}

std::string BodyAttribute(const std::string& dom, const std::string& attr) {
  size_t open = dom.find("<body");
  if (open == std::string::npos) return "";
  size_t close = dom.find('>', open);
  return AttrInTag(dom.substr(open, close - open), attr);
}

}  // namespace sextant::testing
