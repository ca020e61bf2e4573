#ifndef SEXTANT_TESTS_ORCHESTRATOR_TEST_UTIL_H_
#define SEXTANT_TESTS_ORCHESTRATOR_TEST_UTIL_H_

#include <functional>
#include <string>
#include <vector>

#include "sextant/v1/experiment.pb.h"

namespace sextant::testing {

// A fresh empty directory under the test's temp dir; removed at process exit is not promised.
std::string MakeTempDir(const std::string& prefix);

// Writes text to path (creating folders); aborts the test on failure.
void WriteFile(const std::string& path, const std::string& text);

// A trial script of `steps` steps (0.3 s each) that saves its step in
// $SEXTANT_CHECKPOINT_DIR/step once the step is reported and starts from it, and on SIGTERM (a
// preemption or budget notice) saves the last step reported and exits 75. With report_start it first prints
// `resumed_from=<the step it starts at>` (0: from scratch).
std::string CheckpointingStepsScript(int steps, bool report_start = false);
std::string ReadFile(const std::string& path);

// A parsed spec from YAML text; aborts the test when it does not load.
v1::ExperimentSpec SpecFromYaml(const std::string& yaml);

struct CommandOutput {
  int exit_code = -1;  // -N when killed by signal N
  std::string out;
  std::string err;
};

// Runs argv to completion with stdout and stderr captured. Kills it after timeout_seconds.
CommandOutput RunProcess(const std::vector<std::string>& argv, double timeout_seconds = 120);

// A process running in the background, with stdout and stderr captured to files.
class BackgroundProcess {
 public:
  explicit BackgroundProcess(const std::vector<std::string>& argv);
  ~BackgroundProcess();  // kills it if still running
  int pid() const { return pid_; }
  void Signal(int sig);
  // Signals its whole process group (it has one of its own), as a terminal's Ctrl-C does.
  void SignalGroup(int sig);
  // Waits for the exit and returns the exit code (-N for signal N); -1000 after timeout.
  int Wait(double timeout_seconds);
  std::string out() const;
  std::string err() const;
  // Waits until stdout contains needle; false after timeout.
  bool WaitForOutput(const std::string& needle, double timeout_seconds);

 private:
  int pid_ = -1;
  int exit_code_ = -1000;
  std::string out_path_, err_path_;
};

// A port that was free a moment ago on 127.0.0.1, for a process that binds it itself; 0 when
// none could be found.
int FreePort();

// A TCP connection to 127.0.0.1:port whose reads time out after 10 s; -1 when refused.
int ConnectLoopback(int port);
// Sends request to 127.0.0.1:port and returns all the server answers before it closes the
// connection ("" when nothing listens there).
std::string HttpExchange(int port, const std::string& request);
// The body of a response HttpExchange returned ("" without one).
std::string HttpBody(const std::string& response);

// The rows of `sql` on the SQLite database at db_path (read-only), every column as text (NULL as
// ""); empty when the database or table is not there.
std::vector<std::vector<std::string>> QueryRows(const std::string& db_path, const std::string& sql);

// Polls cond every 20 ms until it holds or timeout_seconds pass.
bool WaitFor(const std::function<bool()>& cond, double timeout_seconds);

}  // namespace sextant::testing

#endif  // SEXTANT_TESTS_ORCHESTRATOR_TEST_UTIL_H_
