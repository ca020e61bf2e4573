// `sextant import optuna` on the storages Optuna 3.1 and 5.x write, SQLite and journal, checked
// field by field against Optuna's own view of each study (tests/data/optuna/make_fixtures.py).
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/import/optuna_import.h"
#include "orchestrator/import/optuna_journal.h"
#include "orchestrator/import/optuna_storage.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

namespace fs = std::filesystem;
using ::sextant::testing::MakeTempDir;
using ::sextant::testing::ReadFile;
using ::sextant::testing::RunProcess;
using ::sextant::testing::WriteFile;
using ::testing::HasSubstr;
using Json = nlohmann::json;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
const std::string kFixtures = std::string(SEXTANT_SOURCE_DIR) + "/tests/data/optuna";
const std::string kGenerator = kFixtures + "/make_fixtures.py";
// The vendored Optuna 5 beside the repository; CI may not have it.
const std::string kOptuna5 = std::string(SEXTANT_SOURCE_DIR) + "/../shared/peers/optuna5";

// The fixtures were written under this zone, and every naive time in them is its local time:
// the import must read them in the zone they were written in, and an import that read
// Optuna 5's UTC as local time (or the reverse) is off by 5.5 hours.
class InKolkata {
 public:
  InKolkata() {
    if (const char* tz = getenv("TZ")) saved_ = tz;
    setenv("TZ", "Asia/Kolkata", 1);
  }
  ~InKolkata() {
    if (saved_) {
      setenv("TZ", saved_->c_str(), 1);
    } else {
      unsetenv("TZ");
    }
  }

 private:
  std::optional<std::string> saved_;
};

// Optuna's view writes non-finite floats as these strings; so does the store's metrics JSON.
Json Finite(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// A parameter's value as Optuna shows it (its external form).
Json External(const OptunaParam& p) {
  switch (p.distribution.kind) {
    case OptunaDistribution::Kind::kCategorical:
      return p.distribution.choices[static_cast<size_t>(p.internal)];
    case OptunaDistribution::Kind::kInt:
      return static_cast<int64_t>(p.internal);
    case OptunaDistribution::Kind::kFloat:
      return p.internal;
  }
  return nullptr;
}

void ExpectTime(double got, const Json& want, const std::string& what) {
  if (want.is_null()) {
    EXPECT_EQ(got, 0) << what;
  } else {
    EXPECT_NEAR(got, want.get<double>(), 1e-5) << what;
  }
}

// What the reader makes of the study, against Optuna's view: every field of every trial.
void ExpectReadAsOptunaSees(const OptunaStudy& got, const Json& want) {
  EXPECT_EQ(got.name, want["name"]);
  EXPECT_EQ(Json(got.directions), want["directions"]);
  EXPECT_EQ(got.user_attrs, want["user_attrs"]);
  EXPECT_EQ(got.system_attrs, want["system_attrs"]);
  ASSERT_EQ(got.trials.size(), want["trials"].size());
  for (size_t i = 0; i < got.trials.size(); ++i) {
    const OptunaTrial& t = got.trials[i];
    const Json& w = want["trials"][i];
    SCOPED_TRACE(absl::StrCat("trial ", w["number"].dump(), " ", w["state"].dump()));
    EXPECT_EQ(t.number, w["number"].get<int64_t>());
    EXPECT_EQ(t.state, w["state"]);
    Json params = Json::object(), distributions = Json::object();
    for (const OptunaParam& p : t.params) {
      params[p.name] = External(p);
      distributions[p.name] = p.distribution.stored;
    }
    EXPECT_EQ(params, w["params"]);
    EXPECT_EQ(distributions, w["distributions"]);
    Json values = nullptr;
    if (!t.values.empty()) {
      values = Json::array();
      for (const auto& v : t.values) values.push_back(v ? Finite(*v) : Json());
    }
    EXPECT_EQ(values, w["values"]);
    Json steps = Json::array();
    for (const auto& [step, v] : t.intermediate) steps.push_back({step, Finite(v)});
    EXPECT_EQ(steps, w["intermediate"]);
    EXPECT_EQ(t.user_attrs, w["user_attrs"]);
    EXPECT_EQ(t.system_attrs, w["system_attrs"]);
    ExpectTime(t.started_at, w["datetime_start"], "datetime_start");
    ExpectTime(t.completed_at, w["datetime_complete"], "datetime_complete");
  }
}

// What the run directory holds, against Optuna's view: each trial's state, parameters, values,
// intermediate values (measurements at "step"), user attributes (metrics) and times.
void ExpectImportedAsOptunaSees(const std::string& dir, const Json& want, double imported_at) {
  auto store = Store::Open(RunDir::DbPath(dir), false, true);
  ASSERT_TRUE(store.ok()) << store.status();
  auto rows = (*store)->LoadTrials();
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), want["trials"].size());
  const size_t objectives = want["directions"].size();
  const Json& names =
      want["system_attrs"].contains("study:metric_names")
          ? want["system_attrs"]["study:metric_names"]
          : (objectives == 1 ? Json::array({"value"}) : Json::array({"values_0", "values_1"}));
  const std::map<std::string, v1::TrialState> states = {{"COMPLETE", v1::COMPLETED},
                                                        {"PRUNED", v1::PRUNED},
                                                        {"FAIL", v1::FAILED},
                                                        {"RUNNING", v1::CANCELLED},
                                                        {"WAITING", v1::PENDING}};
  for (size_t i = 0; i < rows->size(); ++i) {
    const TrialRow& row = (*rows)[i];
    const Json& w = want["trials"][i];
    const std::string state = w["state"];
    SCOPED_TRACE(absl::StrCat("trial ", w["number"].dump(), " ", state));
    EXPECT_EQ(row.id, w["number"].get<int64_t>() + 1);
    EXPECT_EQ(row.state, states.at(state));
    const Json params = Json::parse(row.params_json);
    EXPECT_EQ(params, state == "WAITING" ? w["system_attrs"]["fixed_params"] : w["params"]);
    const bool scored = state == "COMPLETE" || state == "PRUNED";
    if (scored && w["values"].is_array()) {
      ASSERT_TRUE(row.value.has_value());
      EXPECT_EQ(Finite(*row.value), w["values"][0]);
      if (objectives > 1) {
        ASSERT_EQ(row.values.size(), objectives);
        for (size_t k = 0; k < objectives; ++k) {
          EXPECT_EQ(Finite(row.values[k]), w["values"][k]);
        }
      }
    } else {
      EXPECT_FALSE(row.value.has_value());
    }
    ExpectTime(row.created_at,
               w["datetime_start"].is_null() ? Json(imported_at) : w["datetime_start"],
               "created_at");
    if (state == "COMPLETE" || state == "PRUNED" || state == "FAIL") {
      ExpectTime(row.finished_at, w["datetime_complete"], "finished_at");
    }
    auto measurements = (*store)->LoadMeasurements(row.id);
    ASSERT_TRUE(measurements.ok());
    Json steps = Json::array(), final = Json::object();
    for (const MeasurementRow& m : *measurements) {
      const Json j = Json::parse(m.metrics_json);
      if (j.contains("step")) {
        steps.push_back({j["step"], j[names[0].get<std::string>()]});
      } else {
        final = j;
      }
    }
    EXPECT_EQ(steps, w["intermediate"]);
    for (const auto& [key, v] : w["user_attrs"].items()) {
      EXPECT_EQ(final["user_attrs_" + key], v.is_number() || v.is_string() ? v : Json(v.dump()))
          << key;
    }
    if (scored && w["values"].is_array()) {
      for (size_t k = 0; k < objectives; ++k) {
        EXPECT_EQ(final[names[k].get<std::string>()], w["values"][k]);
      }
    }
  }
}

// Imports every study of the storage that Optuna's view in truth_path describes, and compares.
void ExpectEveryStudyAsOptunaSees(const std::string& storage, const std::string& truth_path,
                                  const std::string& tmp) {
  SCOPED_TRACE(storage);
  const Json truth = Json::parse(ReadFile(truth_path), nullptr, false);
  ASSERT_TRUE(truth.is_object()) << truth_path;
  ASSERT_EQ(truth["studies"].size(), 3u);  // "scratch" was deleted
  for (const Json& want : truth["studies"]) {
    const std::string name = want["name"];
    SCOPED_TRACE(name);
    absl::StatusOr<OptunaStudy> read = ReadOptunaStorage(storage, name);
    ASSERT_TRUE(read.ok()) << read.status();
    ExpectReadAsOptunaSees(*read, want);

    OptunaImportOptions options;
    options.storage = storage;
    options.study = name;
    options.output_dir = absl::StrCat(tmp, "/", fs::path(storage).filename().string(), "-", name);
    FakeClock clock(absl::FromUnixSeconds(1'700'000'000));
    absl::StatusOr<OptunaImportSummary> summary = ImportOptunaStudy(options, &clock);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(summary->trials, static_cast<int>(want["trials"].size()));
    ExpectImportedAsOptunaSees(options.output_dir, want, 1'700'000'000);
  }
}

TEST(OptunaFormatsTest, CommittedFixturesImportAsOptunaSeesThem) {
  InKolkata zone;
  const std::string tmp = MakeTempDir("optuna-fixtures");
  for (const char* name : {"optuna31.db", "optuna31.log", "optuna5.db", "optuna5.log"}) {
    const std::string storage = kFixtures + "/" + name;
    ExpectEveryStudyAsOptunaSees(storage, storage + ".json", tmp);
  }
}

// Regenerates the fixtures with an Optuna installed now and compares again, so that the
// comparison follows the Optuna that users run, not only the files committed.
void ExpectFreshStudiesAsOptunaSees(const std::vector<std::string>& generator_args,
                                    const std::string& prefix) {
  InKolkata zone;
  const std::string tmp = MakeTempDir("optuna-live");
  std::vector<std::string> argv = {"/usr/bin/python3", kGenerator, tmp};
  argv.insert(argv.end(), generator_args.begin(), generator_args.end());
  testing::CommandOutput r = RunProcess(argv, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* ext : {".db", ".log"}) {
    const std::string storage = tmp + "/" + prefix + ext;
    ExpectEveryStudyAsOptunaSees(storage, storage + ".json", tmp);
  }
}

TEST(OptunaFormatsTest, StudiesDebiansOptunaWritesNowImportAsItSeesThem) {
  // python3-optuna (scripts/install-deps --test), the Optuna the other import tests run.
  ExpectFreshStudiesAsOptunaSees({}, "optuna31");
}

TEST(OptunaFormatsTest, StudiesOptuna5WritesNowImportAsItSeesThem) {
  if (!fs::exists(kOptuna5 + "/optuna/__init__.py")) {
    GTEST_SKIP() << kOptuna5 << " is absent: only the committed Optuna 5 fixtures are checked";
  }
  ExpectFreshStudiesAsOptunaSees({"--optuna5", kOptuna5}, "optuna5");
}

TEST(OptunaFormatsTest, ReadsTheSchemaOptuna5WritesAndItsUtcTimes) {
  InKolkata zone;
  auto study = ReadOptunaStorage(kFixtures + "/optuna5.db", "single");
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_EQ(study->format, "SQLite");
  EXPECT_EQ(study->alembic_version, "v3.2.0.a");
  EXPECT_EQ(study->library_version, "5.0.0.dev");
  // Optuna 5 stores naive UTC: the stored text is the UTC wall time of the Unix seconds.
  const OptunaTrial& t = study->trials.front();
  const absl::Time start = absl::FromUnixMicros(std::llround(t.started_at * 1e6));
  EXPECT_EQ(absl::FormatTime("%Y-%m-%d %H:%M:%E6S", start, absl::UTCTimeZone()), t.datetime_start);
  // Optuna 3.1 stores naive local time.
  auto old = ReadOptunaStorage(kFixtures + "/optuna31.db", "single");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->alembic_version, "v3.0.0.d");
  const absl::Time old_start =
      absl::FromUnixMicros(std::llround(old->trials.front().started_at * 1e6));
  EXPECT_EQ(absl::FormatTime("%Y-%m-%d %H:%M:%E6S", old_start, absl::LocalTimeZone()),
            old->trials.front().datetime_start);
  auto journal = ReadOptunaStorage(kFixtures + "/optuna5.log", "single");
  ASSERT_TRUE(journal.ok()) << journal.status();
  EXPECT_EQ(journal->format, "journal");
  EXPECT_THAT(journal->trials.front().datetime_start, ::testing::EndsWith("+00:00"));
}

// The format is told by content, not by the file's name, and the CLI takes either.
TEST(OptunaFormatsTest, TellsSqliteFromAJournalByContent) {
  const std::string tmp = MakeTempDir("optuna-sniff");
  fs::copy_file(kFixtures + "/optuna5.log", tmp + "/journal.db");
  fs::copy_file(kFixtures + "/optuna5.db", tmp + "/storage.log");
  for (const std::string& storage : {tmp + "/journal.db", tmp + "/storage.log"}) {
    testing::CommandOutput r = RunProcess(
        {kSextant, "import", "optuna", storage, "--study", "multi", "-o", storage + "-imported"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("imported 6 trials"));
  }
  EXPECT_THAT(ReadFile(tmp + "/journal.db-imported/experiment.yaml"),
              HasSubstr("(an Optuna journal file)"));
  EXPECT_THAT(ReadFile(tmp + "/storage.log-imported/experiment.yaml"),
              HasSubstr(R"((schema "v3.2.0.a", written by Optuna "5.0.0.dev"))"));
  // Optuna's JournalFileBackend creates an empty file before the first study.
  WriteFile(tmp + "/empty.log", "");
  testing::CommandOutput r = RunProcess({kSextant, "import", "optuna", tmp + "/empty.log"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(tmp + "/empty.log: holds no study"));
  r = RunProcess({kSextant, "import", "optuna", tmp + "/journal.db"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              HasSubstr(R"(holds 3 studies; name one with --study: "single", "pruned", "multi")"));
}

// By default an imported journal study, like an SQLite one, has room to go on (issue 37).
TEST(OptunaFormatsTest, AnImportedJournalStudyContinuesByDefault) {
  const std::string tmp = MakeTempDir("optuna-journal-room");
  const std::string dir = tmp + "/imported";
  testing::CommandOutput r = RunProcess(
      {kSextant, "import", "optuna", kFixtures + "/optuna5.log", "--study", "multi", "-o", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("room for 100 more trials (search.max_trials 106"));
  testing::CommandOutput ask = RunProcess({kSextant, "ask", dir});
  ASSERT_EQ(ask.exit_code, 0) << ask.err;
  EXPECT_THAT(ask.out, HasSubstr("\"trial\":7"));
}

// Journal lines, built as Optuna writes them.
constexpr const char* kFloat01 =
    R"({"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}})";
constexpr const char* kInt19 =
    R"({"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 9}})";
constexpr const char* kStart = "2026-01-02T03:04:05.000000+00:00";
constexpr const char* kEnd = "2026-01-02T03:04:06.500000+00:00";

Json Line(int op, Json fields) {
  fields["op_code"] = op;
  fields["worker_id"] = "w-1";
  return fields;
}
Json CreateStudy(const std::string& name, Json directions = {1}) {
  return Line(0, {{"study_name", name}, {"directions", directions}});
}
Json CreateTrial(int study) { return Line(4, {{"study_id", study}, {"datetime_start", kStart}}); }
Json SetParam(int trial, const std::string& name, double v, const char* dist = kFloat01) {
  return Line(5, {{"trial_id", trial},
                  {"param_name", name},
                  {"param_value_internal", v},
                  {"distribution", dist}});
}
Json Finish(int trial, double v, int state = 1) {
  return Line(
      6, {{"trial_id", trial}, {"state", state}, {"values", {v}}, {"datetime_complete", kEnd}});
}

std::string Journal(const std::vector<Json>& lines) {
  std::string out;
  for (const Json& l : lines) out += l.dump() + "\n";
  return out;
}

// Optuna's replay rules, each where it decides what Optuna shows.
TEST(OptunaFormatsTest, ReplaysAJournalByOptunasRules) {
  const std::string tmp = MakeTempDir("optuna-replay");
  std::string text = Journal({
      CreateStudy("gone"),         // study 0
      CreateTrial(0),              // trial 0, of a study deleted below
      Line(1, {{"study_id", 0}}),  // delete_study
      CreateStudy("s"),            // study 1
      CreateStudy("s", {2}),       // the name is taken: ignored
      Line(2, {{"study_id", 1}, {"user_attr", {{"owner", "me"}}}}),
      Line(3, {{"study_id", 0}, {"system_attr", {{"lost", 1}}}}),  // deleted study: ignored
      CreateTrial(1),                                              // trial 1: number 0
      SetParam(1, "x", 0.25),
      SetParam(1, "k", 3, kInt19),
      SetParam(1, "x", 0.5),  // set again: replaces, keeps its place
      Line(7, {{"trial_id", 1}, {"step", 2}, {"intermediate_value", 0.7}}),
      Line(7, {{"trial_id", 1}, {"step", 1}, {"intermediate_value", 0.9}}),
      Line(8, {{"trial_id", 1}, {"user_attr", {{"note", "first"}}}}),
      Finish(1, 0.5),
      SetParam(1, "y", 0.5),                                          // finished: ignored
      Line(8, {{"trial_id", 1}, {"user_attr", {{"note", "late"}}}}),  // ignored
      CreateTrial(1),                                                 // trial 2: number 1
      SetParam(2, "x", 3, kInt19),  // incompatible with trial 1's x: ignored
      SetParam(2, "k", 5, kInt19),
      Line(6, {{"trial_id", 2}, {"state", 0}, {"values", nullptr}, {"datetime_start", kEnd}}),
      Line(10, {{"trial_ids", {2}}}),                            // DISCARD_TRIALS: ignored
      Line(9, {{"trial_id", 99}, {"system_attr", {{"k", 1}}}}),  // no such trial: ignored
      // enqueue_trial's template: WAITING, no start.
      Line(4, {{"study_id", 1},
               {"datetime_start", nullptr},
               {"state", 4},
               {"value", nullptr},
               {"values", nullptr},
               {"distributions", Json::object()},
               {"params", Json::object()},
               {"user_attrs", Json::object()},
               {"system_attrs", {{"fixed_params", {{"x", 0.125}, {"k", 2}}}}},
               {"intermediate_values", Json::object()}}),
  });
  text += R"({"op_code":6,"worker_id":"w-1","trial_id":2,"state":1,"val)";  // cut short
  WriteFile(tmp + "/j.log", text);
  absl::StatusOr<OptunaStudy> s = ReadOptunaJournal(tmp + "/j.log", "");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "s");
  EXPECT_EQ(s->study_id, 1);
  EXPECT_EQ(s->directions, std::vector<std::string>{"MINIMIZE"});
  EXPECT_EQ(s->user_attrs, Json({{"owner", "me"}}));
  ASSERT_EQ(s->trials.size(), 3u);
  const OptunaTrial& a = s->trials[0];
  EXPECT_EQ(a.trial_id, 1);
  EXPECT_EQ(a.number, 0);
  EXPECT_EQ(a.state, "COMPLETE");
  ASSERT_EQ(a.params.size(), 2u);
  EXPECT_EQ(a.params[0].name, "x");
  EXPECT_EQ(a.params[0].internal, 0.5);
  EXPECT_EQ(a.params[1].name, "k");
  ASSERT_EQ(a.values.size(), 1u);
  EXPECT_EQ(a.values[0], 0.5);
  EXPECT_EQ(a.intermediate, (std::vector<std::pair<int64_t, double>>{{1, 0.9}, {2, 0.7}}));
  EXPECT_EQ(a.user_attrs, Json({{"note", "first"}}));
  EXPECT_NEAR(a.completed_at - a.started_at, 1.5, 1e-6);  // both UTC, by their offset
  const OptunaTrial& b = s->trials[1];
  EXPECT_EQ(b.trial_id, 2);
  EXPECT_EQ(b.state, "RUNNING");  // the cut last line did not finish it
  ASSERT_EQ(b.params.size(), 1u);
  EXPECT_EQ(b.params[0].name, "k");
  EXPECT_EQ(b.datetime_start, kStart);  // the second RUNNING was ignored
  EXPECT_TRUE(b.system_attrs.empty());
  const OptunaTrial& c = s->trials[2];
  EXPECT_EQ(c.state, "WAITING");
  EXPECT_EQ(c.started_at, 0);
  EXPECT_EQ(c.system_attrs["fixed_params"], Json({{"x", 0.125}, {"k", 2}}));
}

// NaN and the infinities, which Python's json writes as bare words, in values, intermediate
// values and attributes; and Optuna 3's naive times, read as local time.
TEST(OptunaFormatsTest, ReadsPythonsNonFiniteWordsAndNaiveTimes) {
  InKolkata zone;
  const std::string tmp = MakeTempDir("optuna-nonfinite");
  WriteFile(
      tmp + "/j.log",
      Journal({CreateStudy("s", {1, 2}), CreateTrial(0), SetParam(0, "x", 0.5)}) +
          R"({"op_code": 7, "worker_id": "w", "trial_id": 0, "step": 1, "intermediate_value": NaN}
{"op_code": 7, "worker_id": "w", "trial_id": 0, "step": 2, "intermediate_value": -Infinity}
{"op_code": 8, "worker_id": "w", "trial_id": 0, "user_attr": {"curve": [1.5, Infinity, "NaN"]}}
{"op_code": 8, "worker_id": "w", "trial_id": 0, "user_attr": {"plain": [1.5, "NaN"]}}
{"op_code": 6, "worker_id": "w", "trial_id": 0, "state": 1, "values": [Infinity, -1.0], "datetime_complete": "2026-01-02T08:34:07.250000"}
)");
  auto s = ReadOptunaJournal(tmp + "/j.log", "s");
  ASSERT_TRUE(s.ok()) << s.status();
  const OptunaTrial& t = s->trials[0];
  ASSERT_EQ(t.intermediate.size(), 2u);
  EXPECT_TRUE(std::isnan(t.intermediate[0].second));
  EXPECT_EQ(t.intermediate[1].second, -INFINITY);
  ASSERT_EQ(t.values.size(), 2u);
  EXPECT_EQ(t.values[0], INFINITY);
  EXPECT_EQ(t.values[1], -1.0);
  // As the SQLite storage keeps it: a value strict JSON cannot hold stays its text.
  EXPECT_EQ(t.user_attrs["curve"], R"([1.5, Infinity, "NaN"])");
  EXPECT_EQ(t.user_attrs["plain"], Json::parse(R"([1.5, "NaN"])"));
  // 08:34:07.25 in Kolkata (+05:30) is 03:04:07.25 UTC: 2.25 s after the UTC start.
  EXPECT_NEAR(t.completed_at - t.started_at, 2.25, 1e-6);
}

// A hostile or damaged journal: each refused by the command with exit 2, a message naming
// the file and the line, and nothing written.
TEST(OptunaFormatsTest, RefusesAHostileJournalNamingTheLine) {
  const std::string tmp = MakeTempDir("optuna-journal-hostile");
  const std::string out = tmp + "/out";
  fs::create_directories(out);
  const std::string head = Journal({CreateStudy("s"), CreateTrial(0), SetParam(0, "x", 0.5)});
  int n = 0;
  auto expect_refused = [&](const std::string& text, const std::string& needle) {
    SCOPED_TRACE(needle);
    const std::string path = absl::StrCat(tmp, "/j", ++n, ".log");
    WriteFile(path, text);
    testing::CommandOutput r =
        RunProcess({kSextant, "import", "optuna", path, "-o", out + "/imported"});
    EXPECT_EQ(r.exit_code, 2) << r.err;  // a signal would read -N
    EXPECT_THAT(r.err, HasSubstr(path + needle));
    EXPECT_FALSE(fs::exists(out + "/imported"));
    EXPECT_TRUE(fs::is_empty(out));
  };
  expect_refused(head + "{\"op_code\": 6, oops\n" + Finish(0, 1).dump() + "\n", ":4: not JSON");
  expect_refused(head + "\n" + Finish(0, 1).dump() + "\n", ":4: not JSON");
  expect_refused(head + Line(42, {}).dump() + "\n",
                 ":4: 'op_code' 42 is not an operation Optuna writes");
  expect_refused(head + "[1, 2]\n", ":4: not a JSON object");
  expect_refused(head + Line(6, {{"trial_id", "0"}, {"state", 1}}).dump() + "\n",
                 R"(:4: 'trial_id' is not an integer: "0")");
  expect_refused(head + Line(6, {{"trial_id", 0}, {"state", 7}, {"values", nullptr}}).dump() + "\n",
                 ":4: 'state' 7 is not a state");
  expect_refused(head + Line(6, {{"trial_id", 0}, {"state", 1}, {"values", {1}}}).dump() + "\n",
                 ":4: 'datetime_complete' is missing");
  expect_refused(
      head +
          Line(6,
               {{"trial_id", 0}, {"state", 1}, {"values", {1, 2, 3}}, {"datetime_complete", kEnd}})
              .dump() +
          "\n",
      ":4: 'values' holds 3 values; the study has 1 objective");
  expect_refused(Journal({CreateStudy("s", {7})}), ":1: 'directions' holds 7, not a direction");
  expect_refused(Journal({CreateStudy(std::string(2000, 'n'))}),
                 ":1: 'study_name' is longer than 1024 bytes");
  expect_refused(
      head +
          SetParam(0, "c", 5,
                   R"({"name": "CategoricalDistribution", "attributes": {"choices": ["a", "b"]}})")
              .dump() +
          "\n",
      ":4: 'c' has choice index 5, not one of the 2 choices");
  expect_refused(
      head + SetParam(0, "f", 0.5, R"({"name": "FancyDistribution", "attributes": {}})").dump() +
          "\n",
      ":4: 'f' unsupported distribution 'FancyDistribution'");
  expect_refused(head + SetParam(0, "x", NAN).dump() + "\n",  // nlohmann writes NaN as null
                 ":4: 'x' has a value that is not a finite number");
  expect_refused(
      head + Line(7, {{"trial_id", 0}, {"step", 1.5}, {"intermediate_value", 1}}).dump() + "\n",
      ":4: 'step' is not an integer: 1.5");
  expect_refused(head + std::string(100000, '[') + "\n", ":4: nests deeper than 64 levels");
  expect_refused(
      head + Line(8, {{"trial_id", 0}, {"user_attr", {{"a", 1}, {"b", 2}}}}).dump() + "\n",
      ":4: 'user_attr' is not an object of one key");
  expect_refused(head + "\"" + std::string(5 << 20, 'x') + "\"\n", ":4: longer than 4194304 bytes");
  expect_refused(head + "{\"op_code\": 0, \"study_name\": \"\xff\", \"directions\": [1]}\n" +
                     Finish(0, 1).dump() + "\n",
                 ":4: not JSON");
  // Intact, it imports.
  WriteFile(tmp + "/good.log", head + Finish(0, 1).dump() + "\n");
  testing::CommandOutput r =
      RunProcess({kSextant, "import", "optuna", tmp + "/good.log", "-o", out + "/imported"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace sextant
