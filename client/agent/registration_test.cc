#include "client/agent/registration.h"

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

LaunchOptions Parse(const std::vector<std::string>& args) {
  HostInfo host;
  host.hostname = "host-x";
  auto options = ParseLaunchOptions(args, host);
  EXPECT_TRUE(options.ok()) << options.status();
  return *options;
}

TEST(BuildRegistration, Flags_CopiedIntoRegisterAndSettings) {
  LaunchOptions o =
      Parse({"--job", "abc", "--nnodes", "2:4", "--nproc-per-node", "3", "--max-restarts", "5",
             "--node-rank", "1", "--shutdown-timeout", "7", "--rdzv-conf",
             "join_timeout=90,last_call_timeout=5,"
             "heartbeat_timeout=2",
             "train.py"});
  v1::Register r = BuildRegistration(o, "10.1.2.3");
  EXPECT_EQ(r.job_id(), "abc");
  EXPECT_EQ(r.node_id(), "host-x");
  EXPECT_EQ(r.nproc(), 3);
  EXPECT_EQ(r.requested_rank(), 1);
  EXPECT_EQ(r.address(), "10.1.2.3");
  EXPECT_EQ(r.incarnation(), 0u);  // the session client sets it
  const v1::JobSettings& s = r.settings();
  EXPECT_EQ(s.min_nodes(), 2);
  EXPECT_EQ(s.max_nodes(), 4);
  EXPECT_EQ(s.nproc_per_node(), 3);
  EXPECT_EQ(s.max_restarts(), 5);
  EXPECT_EQ(s.join_timeout_ms(), 90000);
  EXPECT_EQ(s.last_call_timeout_ms(), 5000);
  EXPECT_EQ(s.heartbeat_timeout_ms(), 2000);
  EXPECT_EQ(s.heartbeat_interval_ms(), 500);  // a quarter of the timeout
  EXPECT_EQ(s.shutdown_timeout_ms(), 7000);
}

TEST(BuildRegistration, NoRdzvConf_FixedDefaultsNoRankWish) {
  LaunchOptions o = Parse({"train.py"});
  v1::Register r = BuildRegistration(o, "h");
  EXPECT_EQ(r.requested_rank(), -1);
  EXPECT_EQ(r.settings().join_timeout_ms(), 600000);
  EXPECT_EQ(r.settings().last_call_timeout_ms(), 30000);
  EXPECT_EQ(r.settings().heartbeat_interval_ms(), 500);
  EXPECT_EQ(r.settings().heartbeat_timeout_ms(), 3000);
  EXPECT_EQ(r.settings().shutdown_timeout_ms(), 30000);
}

TEST(BuildRegistration, JoinTimeoutAlone_ShortensTheDefaultLastCall) {
  LaunchOptions o = Parse({"--rdzv-conf", "join_timeout=5", "train.py"});
  v1::Register r = BuildRegistration(o, "h");
  EXPECT_EQ(r.settings().join_timeout_ms(), 5000);
  EXPECT_EQ(r.settings().last_call_timeout_ms(), 5000);
}

TEST(BuildRegistration, SameFlags_IdenticalSettings) {
  LaunchOptions a = Parse({"--job", "j", "--nnodes", "2", "x.py"});
  LaunchOptions b = Parse({"--job", "j", "--nnodes", "2", "y.py", "--lr", "1"});
  EXPECT_EQ(BuildRegistration(a, "a").settings().SerializeAsString(),
            BuildRegistration(b, "b").settings().SerializeAsString());
}

}  // namespace
}  // namespace ddp::client

namespace ddp::client {
namespace {

// --connect-timeout is parsed with the other flags (launch_options.cc).
TEST(ConnectTimeoutFlag, GivenOrDefault_Parsed) {
  EXPECT_EQ(Parse({"--connect-timeout", "2.5", "x.py"}).connect_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(Parse({"--connect_timeout=1m", "x.py"}).connect_timeout, absl::Minutes(1));
  EXPECT_EQ(Parse({"x.py"}).connect_timeout, absl::Seconds(60));
  HostInfo host;
  EXPECT_FALSE(ParseLaunchOptions({"--connect-timeout", "soon", "x.py"}, host).ok());
}

TEST(AdvertisedAddressTest, NodeIdIsNeverTheAddress) {
  LaunchOptions options;
  options.node_id = "node-a";  // a label that does not resolve
  EXPECT_EQ(AdvertisedAddress(options, "trainer-17.example"), "trainer-17.example");
  EXPECT_EQ(AdvertisedAddress(options, ""), "127.0.0.1");
  options.local_addr = "10.1.2.3";
  EXPECT_EQ(AdvertisedAddress(options, "trainer-17.example"), "10.1.2.3");
}

}  // namespace
}  // namespace ddp::client
