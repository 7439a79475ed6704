#include "tests/ha/network_namespace.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace ddp::testing {
namespace {

constexpr char kIp[] = "/usr/sbin/ip";

// Runs `ip ARGS...`, its output to /dev/null; the exit status.
int RunIp(std::vector<std::string> args) {
  args.insert(args.begin(), kIp);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
    execv(kIp, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

NetworkNamespace::NetworkNamespace(int index)
    : index_(index),
      name_(absl::StrCat("ddp-ha-", getpid())),
      suffix_(absl::StrCat(getpid() % 100000)) {}

absl::StatusOr<std::unique_ptr<NetworkNamespace>> NetworkNamespace::Create() {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError("not root: network namespaces need CAP_NET_ADMIN");
  }
  if (access(kIp, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kIp, " is missing (iproute2; tools/setup.sh installs it)"));
  }
  std::unique_ptr<NetworkNamespace> ns(new NetworkNamespace(getpid() % 250 + 1));
  const std::string n = absl::StrCat(ns->index_);
  const std::string& id = ns->suffix_;
  const std::string& name = ns->name_;
  // Link names are at most 15 characters: dhc/dns + pid + side.
  const std::vector<std::vector<std::string>> steps = {
      {"netns", "add", name},
      {"netns", "exec", name, kIp, "link", "set", "lo", "up"},
      {"link", "add", "dhc" + id, "type", "veth", "peer", "name", "dnc" + id},
      {"link", "add", "dhs" + id, "type", "veth", "peer", "name", "dns" + id},
      {"link", "set", "dnc" + id, "netns", name},
      {"link", "set", "dns" + id, "netns", name},
      {"addr", "add", "10.77." + n + ".1/24", "dev", "dhc" + id},
      {"addr", "add", "10.78." + n + ".1/24", "dev", "dhs" + id},
      {"link", "set", "dhc" + id, "up"},
      {"link", "set", "dhs" + id, "up"},
      {"netns", "exec", name, kIp, "addr", "add", "10.77." + n + ".2/24", "dev", "dnc" + id},
      {"netns", "exec", name, kIp, "addr", "add", "10.78." + n + ".2/24", "dev", "dns" + id},
      {"netns", "exec", name, kIp, "link", "set", "dnc" + id, "up"},
      {"netns", "exec", name, kIp, "link", "set", "dns" + id, "up"},
  };
  for (const auto& step : steps) {
    if (RunIp(step) != 0) {
      std::string command = kIp;
      for (const std::string& arg : step) absl::StrAppend(&command, " ", arg);
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make a network namespace here: `", command, "` failed"));
    }
  }
  return ns;
}

NetworkNamespace::~NetworkNamespace() {
  RunIp({"link", "del", "dhc" + suffix_});
  RunIp({"link", "del", "dhs" + suffix_});
  RunIp({"netns", "del", name_});
}

std::vector<std::string> NetworkNamespace::ExecPrefix() const {
  return {kIp, "netns", "exec", name_};
}

std::string NetworkNamespace::address() const { return absl::StrCat("10.77.", index_, ".2"); }

std::string NetworkNamespace::host_store_address() const {
  return absl::StrCat("10.78.", index_, ".1");
}

absl::Status NetworkNamespace::SetStoreLink(const std::string& state) {
  if (RunIp({"link", "set", "dhs" + suffix_, state}) != 0) {
    return absl::InternalError(absl::StrCat("ip link set dhs", suffix_, " ", state, " failed"));
  }
  return absl::OkStatus();
}

absl::Status NetworkNamespace::Cut() { return SetStoreLink("down"); }

absl::Status NetworkNamespace::Heal() { return SetStoreLink("up"); }

}  // namespace ddp::testing
