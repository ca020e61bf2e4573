#include "aggregator/client_roster.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/ids.h"

namespace sextant {

absl::StatusOr<std::unique_ptr<ClientRoster>> ClientRoster::Open(std::string region, int64_t places,
                                                                 const std::string& experiment_id,
                                                                 std::string file) {
  if (places < 1) return absl::InvalidArgumentError("a roster needs at least one place");
  std::unique_ptr<ClientRoster> r(
      new ClientRoster(std::move(region), places, experiment_id, std::move(file)));
  std::ifstream in(r->file_);
  std::string line;
  absl::MutexLock lock(&r->mu_);
  if (in && std::getline(in, line) && line != "experiment " + experiment_id) {
    return absl::InvalidArgumentError(
        absl::StrCat(r->file_, ":1: the places of another run ('", line.substr(0, 160),
                     "'); remove the file or use another --work-dir"));
  }
  for (int n = 2; std::getline(in, line); ++n) {
    const size_t space = line.find(' ');
    int64_t place = -1;
    const std::string name = space == std::string::npos ? "" : line.substr(space + 1);
    if (space == std::string::npos || !absl::SimpleAtoi(line.substr(0, space), &place) ||
        place < 0 || place >= places || !CheckId("name", name).ok() || r->holder_.count(place) ||
        r->place_.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(r->file_, ":", n,
                                                     ": expected 'PLACE NAME' with a place below ",
                                                     places, " and a client name, each held once"));
    }
    r->holder_[place] = name;
    r->place_[name] = place;
  }
  return r;
}

absl::StatusOr<int64_t> ClientRoster::Join(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (auto it = place_.find(name); it != place_.end()) return it->second;
  int64_t place = -1;
  if (absl::SimpleAtoi(name, &place) && absl::StrCat(place) == name && place >= 0 &&
      place < places_ && !holder_.count(place)) {
    // Its own place.
  } else {
    place = -1;
    for (int64_t p = 0; p < places_ && place < 0; ++p) {
      if (!holder_.count(p)) place = p;
    }
  }
  if (place < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("region ", region_, " has ", places_,
                     " client places, all held by other clients (see ", file_, ")"));
  }
  // The whole roster, with the new place, replaces the file at once.
  std::string text = absl::StrCat("experiment ", experiment_id_, "\n");
  for (const auto& [p, n] : holder_) absl::StrAppend(&text, p, " ", n, "\n");
  absl::StrAppend(&text, place, " ", name, "\n");
  if (absl::Status s = WriteFileAtomically(file_, text); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot record the client's place in ", file_, ": ", s.message()));
  }
  holder_[place] = name;
  place_[name] = place;
  return place;
}

std::string ClientRoster::Holder(const std::string& place_id) const {
  const std::string prefix = region_ + "/";
  int64_t place = -1;
  if (place_id.rfind(prefix, 0) != 0 || !absl::SimpleAtoi(place_id.substr(prefix.size()), &place))
    return place_id;
  absl::MutexLock lock(&mu_);
  auto it = holder_.find(place);
  return it == holder_.end() ? place_id : prefix + it->second;
}

std::string ClientRoster::PlaceOf(const std::string& id) const {
  const std::string prefix = region_ + "/";
  if (id.rfind(prefix, 0) != 0) return id;
  absl::MutexLock lock(&mu_);
  auto it = place_.find(id.substr(prefix.size()));
  return it == place_.end() ? id : absl::StrCat(prefix, it->second);
}

int64_t ClientRoster::held() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(holder_.size());
}

}  // namespace sextant
