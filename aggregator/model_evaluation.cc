#include "aggregator/model_evaluation.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"

namespace sextant {
namespace {

// The files of one evaluation are the round's scratch: no restart reads them, so no fsync.
constexpr AtomicWriteOptions kScratch{0644, /*sync=*/false};

}  // namespace

std::string EvaluationFiles::request(int64_t round) const {
  return absl::StrCat(dir, "/eval-", round, ".f32");
}

std::string EvaluationFiles::score(int64_t round) const {
  return absl::StrCat(dir, "/eval-", round, ".score");
}

absl::Status WriteFloatsAtomically(const std::string& path, absl::Span<const float> values) {
  return WriteFileAtomically(
      path,
      absl::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)),
      kScratch);
}

absl::StatusOr<std::vector<float>> ReadFloats(const std::string& path, int64_t expected_size) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec) return absl::DataLossError(absl::StrCat(path, ": ", ec.message()));
  if (bytes % sizeof(float) != 0 ||
      (expected_size >= 0 && bytes != static_cast<uintmax_t>(expected_size) * sizeof(float))) {
    return absl::DataLossError(absl::StrCat(
        path, " holds ", bytes, " bytes, not ",
        expected_size >= 0 ? absl::StrCat(expected_size) : "whole", " float32 values"));
  }
  std::vector<float> values(bytes / sizeof(float));
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(bytes));
  if (!in) return absl::DataLossError(absl::StrCat("cannot read ", path));
  return values;
}

absl::Status WriteScore(const std::string& path, const ModelScore& score) {
  const std::string text = absl::StrFormat("loss=%.17g accuracy=%.17g examples=%d\n", score.loss,
                                           score.accuracy, score.examples);
  return WriteFileAtomically(path, text, kScratch);
}

absl::StatusOr<ModelScore> ReadScore(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " is not there yet"));
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  std::map<std::string, std::string> kv;
  for (absl::string_view token :
       absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(token, absl::MaxSplits('=', 1));
    kv[p.first] = p.second;
  }
  ModelScore s;
  if (!absl::SimpleAtod(kv["loss"], &s.loss) || !absl::SimpleAtod(kv["accuracy"], &s.accuracy) ||
      !absl::SimpleAtoi(kv["examples"], &s.examples)) {
    return absl::DataLossError(absl::StrCat(path, ": not a score: '", text, "'"));
  }
  return s;
}

int64_t RequestRound(const std::string& file_name) {
  absl::string_view name = file_name;
  int64_t round = -1;
  if (!absl::ConsumePrefix(&name, "eval-") || !absl::ConsumeSuffix(&name, ".f32") ||
      !absl::SimpleAtoi(name, &round) || round < 0) {
    return -1;
  }
  return round;
}

}  // namespace sextant
