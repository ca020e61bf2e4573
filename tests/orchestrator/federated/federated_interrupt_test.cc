// Ctrl-C of a federated run, as a terminal sends it: SIGINT to the whole process group. The run
// must end INTERRUPTED with exit 130 every time, whatever its children do with the same signal,
// and resume cleanly to the end.
#include <signal.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::BackgroundProcess;
using testing::QueryRows;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

std::string State(const std::string& run) {
  auto rows = QueryRows(run + "/state.db", "SELECT value FROM meta WHERE key = 'state'");
  return rows.empty() ? "" : rows[0][0];
}

TEST(FederatedInterruptTest, CtrlCToTheProcessGroupEndsInterruptedEveryTimeAndResumes) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = testing::MakeTempDir("fl-interrupt");
  testing::WriteFile(dir + "/exp.yaml", R"(name: fl-interrupt
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 80
  min_clients: 2
  examples_per_client: 200
  validation_examples: 200
)");
  const std::string run = dir + "/run";
  for (int i = 0; i < 4; ++i) {
    std::vector<std::string> argv = {kSextant, "run", dir + "/exp.yaml", "--run-dir", run};
    if (i > 0) argv = {kSextant, "resume", run};
    BackgroundProcess p(argv);
    // Stop it mid-round, once a round of this session has been listed.
    ASSERT_TRUE(p.WaitForOutput("accuracy=", 120)) << p.out() << p.err();
    p.SignalGroup(SIGINT);
    EXPECT_EQ(p.Wait(60), 130) << "stop " << i << "\n" << p.out() << p.err();
    EXPECT_EQ(State(run), "INTERRUPTED") << "stop " << i << "\n" << p.out() << p.err();
    EXPECT_THAT(p.out(), HasSubstr("continue with: sextant resume " + run));
  }
  testing::CommandOutput done = testing::RunProcess({kSextant, "resume", run}, 300);
  ASSERT_EQ(done.exit_code, 0) << done.out << done.err;
  EXPECT_EQ(State(run), "COMPLETED");
  EXPECT_THAT(done.out, HasSubstr("after 80 rounds"));
  auto trial = QueryRows(run + "/state.db", "SELECT state FROM trials");
  ASSERT_EQ(trial.size(), 1u);
  EXPECT_EQ(trial[0][0], "COMPLETED");
}

}  // namespace
}  // namespace sextant
