#ifndef SEXTANT_TESTS_ORCHESTRATOR_REPORT_TEST_SUPPORT_H_
#define SEXTANT_TESTS_ORCHESTRATOR_REPORT_TEST_SUPPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "sextant/v1/trial.pb.h"

namespace sextant::testing {

struct SyntheticRunOptions {
  int trials = 1000;
  int epochs = 27;  // measurements per completed trial
  int workers = 8;
  v1::RunState state = v1::RUN_COMPLETED;  // the run's stored state
  bool all_failed = false;                 // every trial FAILED (no value)
  std::string odd_category;  // an extra categorical value, e.g. markup for escaping tests
  std::string name = "synthetic";
};

// Writes a run directory through the real Store API: a spec with float (log), int and
// categorical parameters and an ASHA schedule, trials with rung records (promoted and pruned),
// attempts on several workers, per-epoch measurements and events. Deterministic.
void BuildSyntheticRun(const std::string& dir, const SyntheticRunOptions& options);

struct ObjectivesRunOptions {
  int objectives = 2;  // 1 (`objective:`) or 2 to 4 (`objectives:`)
  int trials = 40;
  int infeasible_every = 0;  // every k-th trial breaks the constraint mem <= 50 (0: no constraint)
  int failed_every = 0;      // every k-th trial FAILED (0: none)
  bool cost_aware = false;   // one objective: sampler bayesian with search.cost_aware
  bool billed = true;        // each trial has a trial cost row (dollars > 0), and workers
                             // instance rows
  std::string name = "objectives";
};

// Writes a finished run directory through the real Store API for the objectives named f1
// (minimize), f2 (maximize), f3 and f4 (minimize) over parameters a, b, c: trials with their
// values, feasibility and seconds, attempts on two workers, one measurement each, and (billed)
// cost rows. Deterministic.
void BuildObjectivesRun(const std::string& dir, const ObjectivesRunOptions& options);

// An RGBA image decoded from a PNG (8-bit RGB or RGBA, not interlaced).
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgba;  // width * height * 4
};
bool DecodePng(const std::string& bytes, Image* out, std::string* error);
std::string EncodePng(const Image& image);
Image Crop(const Image& image, int x, int y, int w, int h);
// The variance of the grey level over a region (0 for a blank region).
double GreyVariance(const Image& image, int x, int y, int w, int h);

// Where Debian's chromium is, or "" when it is not installed.
std::string ChromiumPath();

struct BrowserRender {
  int exit_code = -1;
  std::string dom;  // --dump-dom output
  std::string stderr_text;
  double wall_seconds = 0;
};
// Loads file in headless Chromium and returns the DOM after load.
BrowserRender DumpDom(const std::string& html_path, int width, int height);
// The same for a URL (a live page served over HTTP). With virtual_time_ms > 0, the page's
// timers run for that much virtual time before the DOM is taken (--virtual-time-budget).
BrowserRender DumpDomUrl(const std::string& url, int width, int height, int virtual_time_ms = 0);
// Takes a screenshot of file at width x height into png_path; returns the exit code.
int Screenshot(const std::string& html_path, const std::string& png_path, int width, int height,
               std::string* log);

// The value of attribute attr on the element whose id is id, HTML entities decoded ("" when
// absent).
std::string AttributeOf(const std::string& html, const std::string& id, const std::string& attr);
// The value of attr on the <body> element.
std::string BodyAttribute(const std::string& dom, const std::string& attr);
std::string UnescapeHtml(const std::string& s);

}  // namespace sextant::testing

#endif  // SEXTANT_TESTS_ORCHESTRATOR_REPORT_TEST_SUPPORT_H_
