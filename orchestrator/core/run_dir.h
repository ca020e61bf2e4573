#ifndef SEXTANT_ORCHESTRATOR_CORE_RUN_DIR_H_
#define SEXTANT_ORCHESTRATOR_CORE_RUN_DIR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sextant {

// A run directory: state.db, logs/ (trial and worker output), artifacts/checkpoints/.
// Holding a RunDir holds an exclusive lock on it (flock on DIR/lock), so there is exactly one
// writer. The lock is released when the RunDir is destroyed or the process dies.
// The directory and its folders are mode 0700 (its files are 0600 by the process umask,
// common/process_setup.h): the trials' env values and results are not for other local users.
// No entry in it is a symbolic link, so that nothing is written through one; only the trials'
// own checkpoint folders (artifacts/checkpoints/*/) are theirs to fill as they like.
class RunDir {
 public:
  // Creates the folders if needed (0700, and makes existing ones 0700) and takes the lock.
  // Returns InvalidArgument naming the first entry that is a symbolic link, before anything is
  // created, opened or written; FailedPrecondition naming the holder's pid when another process
  // holds the lock; Internal on filesystem errors (a folder of another user cannot be made
  // private).
  static absl::StatusOr<RunDir> Acquire(const std::string& path);

  RunDir(RunDir&& other) noexcept;
  RunDir& operator=(RunDir&&) = delete;
  ~RunDir();

  const std::string& path() const { return path_; }
  std::string db_path() const { return path_ + "/state.db"; }
  std::string logs_dir() const { return path_ + "/logs"; }
  std::string checkpoints_dir() const { return path_ + "/artifacts/checkpoints"; }

  // The path of the store inside a run directory, for readers that take no lock.
  static std::string DbPath(const std::string& dir) { return dir + "/state.db"; }
  // The folder of trial `trial`'s own federated run, in a federated search's run directory.
  static std::string FederatedTrialDir(const std::string& dir, int64_t trial) {
    return dir + "/artifacts/checkpoints/trial-" + std::to_string(trial) + "/federation";
  }

 private:
  RunDir(std::string path, int fd) : path_(std::move(path)), lock_fd_(fd) {}
  std::string path_;
  int lock_fd_ = -1;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_RUN_DIR_H_
