// Who starts on each model version of a buffered run with clients_per_round below every client
// (VersionStarts): the cap, a draw that does not depend on the order of the calls, every
// client's fair share over many versions, and the release that a gone client cannot block.
#include "aggregator/version_starts.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);
const std::vector<std::string> kClients = {"east/0", "east/1", "east/2", "east/3"};

// Every client asks for a version above `after`, then each calls Admit in `order`; returns
// those admitted.
std::set<std::string> Round(VersionStarts& s, int64_t version, int64_t after,
                            const std::vector<std::string>& order) {
  for (const std::string& c : kClients) s.Ask(c, after);
  std::set<std::string> in;
  for (const std::string& c : order) {
    if (s.Admit(c, version, kT0)) in.insert(c);
  }
  return in;
}

TEST(VersionStartsTest, WithoutACapEveryCallerStarts) {
  VersionStarts s;
  s.Published(1, kT0);
  EXPECT_EQ(Round(s, 1, 0, kClients).size(), 4u);
}

TEST(VersionStartsTest, TheCapHoldsAndTheDrawNotTheCallOrderSaysWhoStarts) {
  std::vector<std::string> order = kClients;
  std::set<std::string> first;
  int orders = 0;
  do {
    VersionStarts s(2, /*seed=*/7);
    s.Published(1, kT0);
    const std::set<std::string> in = Round(s, 1, 0, order);
    ASSERT_EQ(in.size(), 2u);
    if (first.empty()) first = in;
    EXPECT_EQ(in, first) << "order starting " << order[0];
    // Those admitted are admitted again (no newer version came); the others still are not.
    for (const std::string& c : kClients) {
      EXPECT_EQ(s.Admit(c, 1, kT0), in.count(c) == 1) << c;
    }
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 24);
}

TEST(VersionStartsTest, ClientsStillTrainingOrWaitingForANewerVersionDoNotTakePartInTheDraw) {
  VersionStarts s(2, 1);
  s.Published(1, kT0);
  const std::set<std::string> in = Round(s, 1, 0, kClients);
  ASSERT_EQ(in.size(), 2u);
  s.Published(2, kT0 + absl::Seconds(1));
  // Version 2: the two that trained on 1 are still training; one of the others asks for a
  // version above 2 (it has one), so the last free client starts whatever its draw.
  std::vector<std::string> out;
  for (const std::string& c : kClients) {
    if (!in.count(c)) out.push_back(c);
  }
  s.Ask(out[0], 2);
  s.Ask(out[1], 1);
  EXPECT_TRUE(s.Admit(out[1], 2, kT0 + absl::Seconds(1)));
  // A client that asks again is free: the second place of version 2 goes by the draw between
  // the two that trained on 1 and asked after it.
  std::vector<std::string> back(in.begin(), in.end());
  for (const std::string& c : back) s.Ask(c, 1);
  const bool a = s.Admit(back[0], 2, kT0 + absl::Seconds(1));
  const bool b = s.Admit(back[1], 2, kT0 + absl::Seconds(1));
  EXPECT_NE(a, b);  // exactly one: the cap is 2
}

TEST(VersionStartsTest, OverManyVersionsEveryClientStartsItsShare) {
  VersionStarts s(2, 3);
  std::map<std::string, int> starts;
  std::vector<std::string> order = kClients;
  for (int64_t v = 1; v <= 2000; ++v) {
    s.Published(v, kT0 + absl::Seconds(v));
    std::rotate(order.begin(), order.begin() + 1, order.end());  // calls come in turn
    for (const std::string& c : Round(s, v, v - 1, order)) ++starts[c];
  }
  for (const std::string& c : kClients) {
    EXPECT_GT(starts[c], 900) << c;  // 1000 expected: 2 of 4 on each of 2000 versions
    EXPECT_LT(starts[c], 1100) << c;
  }
}

TEST(VersionStartsTest, AVersionOutLongerThanThreeGapsLetsAnyoneStart) {
  VersionStarts s(1, 5);
  s.Published(1, kT0);
  s.Published(2, kT0 + absl::Seconds(4));  // the longest gap: 4 s; the release: 12 s
  for (const std::string& c : kClients) s.Ask(c, 1);
  int in = 0;
  for (const std::string& c : kClients) in += s.Admit(c, 2, kT0 + absl::Seconds(10)) ? 1 : 0;
  EXPECT_EQ(in, 1);
  // The one admitted is gone; 12 s on, the others start.
  for (const std::string& c : kClients) in += s.Admit(c, 2, kT0 + absl::Seconds(17)) ? 1 : 0;
  EXPECT_EQ(in, 1 + 4);
}

}  // namespace
}  // namespace sextant
