#include "tests/ha/ha_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "ddp/v1/cluster.grpc.pb.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace ddp::testing {
namespace {

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  return text.size() > 1500 ? text.substr(text.size() - 1500) : text;
}

}  // namespace

bool EtcdInstalled() { return access(kEtcdBinary, X_OK) == 0; }

// `count` distinct free loopback ports: each socket stays bound until all are
// picked (the system may hand a port just released out again: two members
// once got the same one, and etcd refused the duplicate URL).
std::vector<int> FreeLoopbackPorts(int count) {
  std::vector<int> fds;
  std::vector<int> ports;
  for (int i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      socklen_t length = sizeof(address);
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
      port = ntohs(address.sin_port);
    }
    fds.push_back(fd);
    ports.push_back(port);
  }
  for (int fd : fds) close(fd);
  return ports;
}

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(const std::string& dir, int members,
                                                                std::string also_listen_on) {
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster(dir, std::move(also_listen_on)));
  // The members' logs go to DIR/mN.log (else to this process's stderr).
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  std::vector<std::string> peers;
  const std::vector<int> ports = FreeLoopbackPorts(2 * members);
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = absl::StrCat("m", i);
    m.client_port = ports[2 * i];
    m.peer_port = ports[2 * i + 1];
    peers.push_back(absl::StrCat(m.name, "=http://127.0.0.1:", m.peer_port));
    cluster->members_.push_back(m);
  }
  cluster->initial_cluster_ = absl::StrJoin(peers, ",");
  for (int i = 0; i < members; ++i) {
    if (absl::Status spawned = cluster->Spawn(i, false); !spawned.ok()) return spawned;
  }
  if (absl::Status healthy = cluster->WaitHealthy(absl::Seconds(30)); !healthy.ok()) {
    return healthy;
  }
  return cluster;
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) Kill9(i);
}

absl::Status EtcdCluster::Spawn(int index, bool existing) {
  Member& m = members_[index];
  const std::string data = absl::StrCat(dir_, "/", m.name);
  const std::string client = absl::StrCat("http://127.0.0.1:", m.client_port);
  const std::string peer = absl::StrCat("http://127.0.0.1:", m.peer_port);
  const std::string listen =
      also_listen_on_.empty()
          ? client
          : absl::StrCat(client, ",http://", also_listen_on_, ":", m.client_port);
  std::vector<std::string> args = {
      kEtcdBinary, "--name", m.name, "--data-dir", data, "--listen-client-urls", listen,
      "--advertise-client-urls", client, "--listen-peer-urls", peer,
      "--initial-advertise-peer-urls", peer, "--initial-cluster", initial_cluster_,
      "--initial-cluster-state", existing ? "existing" : "new",
      // A commit batch is one transaction.
      "--max-txn-ops", "100000",
      // Raft timers of a LAN: an election takes about 0.5 s.
      "--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "warn"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string log = absl::StrCat(dir_, "/", m.name, ".log");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDERR_FILENO);
      dup2(fd, STDOUT_FILENO);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  m.pid = pid;
  return absl::OkStatus();
}

std::vector<std::string> EtcdCluster::endpoints() const { return endpoints_on("127.0.0.1"); }

std::vector<std::string> EtcdCluster::endpoints_on(const std::string& host) const {
  std::vector<std::string> out;
  for (const Member& m : members_) out.push_back(absl::StrCat(host, ":", m.client_port));
  return out;
}

std::string EtcdCluster::Store(const std::string& prefix) const {
  return absl::StrCat("etcd://", absl::StrJoin(endpoints(), ","), "/", prefix);
}

int EtcdCluster::RaftLeader() const {
  for (int i = 0; i < size(); ++i) {
    if (members_[i].pid < 0) continue;
    auto stub = etcdserverpb::Maintenance::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", members_[i].client_port), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    etcdserverpb::StatusResponse status;
    if (stub->Status(&context, etcdserverpb::StatusRequest(), &status).ok() &&
        status.leader() != 0 && status.leader() == status.header().member_id()) {
      return i;
    }
  }
  return -1;
}

absl::Status EtcdCluster::WaitHealthy(absl::Duration bound) const {
  const absl::Time deadline = absl::Now() + bound;
  while (absl::Now() < deadline) {
    if (RaftLeader() >= 0) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(100));
  }
  std::string logs;
  for (const Member& m : members_) {
    absl::StrAppend(&logs, "\n--- ", m.name, ":\n", Tail(absl::StrCat(dir_, "/", m.name, ".log")));
  }
  return absl::UnavailableError(
      absl::StrCat("etcd elected no leader within ", absl::FormatDuration(bound), logs));
}

void EtcdCluster::Kill9(int index) {
  Member& m = members_[index];
  if (m.pid < 0) return;
  kill(m.pid, SIGKILL);
  waitpid(m.pid, nullptr, 0);
  m.pid = -1;
}

absl::Status EtcdCluster::Restart(int index) { return Spawn(index, true); }

CoordinatorGroup::CoordinatorGroup(const std::string& dir, const std::string& store, int count,
                                   std::vector<std::string> extra_args,
                                   std::function<void(CoordinatorProcessOptions&)> customize) {
  for (int i = 0; i < count; ++i) {
    const std::string own = absl::StrCat(dir, "/c", i);
    mkdir(own.c_str(), 0755);
    CoordinatorProcessOptions options;
    options.binary = CoordinatorBinaryFromRunfiles();
    options.data_dir = own + "/data";
    options.work_dir = own;
    options.extra_args = {"--store", store};
    options.extra_args.insert(options.extra_args.end(), extra_args.begin(), extra_args.end());
    if (customize) customize(options);
    coordinators_.push_back(std::make_unique<CoordinatorProcess>(options));
  }
}

absl::Status CoordinatorGroup::StartAll() {
  for (auto& coordinator : coordinators_) {
    if (absl::Status started = coordinator->Start(); !started.ok()) return started;
  }
  return absl::OkStatus();
}

std::string CoordinatorGroup::Targets() const {
  std::vector<std::string> out;
  for (const auto& coordinator : coordinators_) out.push_back(coordinator->address());
  return absl::StrJoin(out, ",");
}

std::string CoordinatorGroup::RoleOf(int i) const {
  if (!coordinators_[i]->running()) return "not running";
  auto stub = v1::ClusterService::NewStub(
      grpc::CreateChannel(coordinators_[i]->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  v1::ClusterStatus status;
  grpc::Status answer = stub->GetClusterStatus(&context, v1::GetClusterStatusRequest(), &status);
  if (!answer.ok()) return absl::StrCat("error: ", answer.error_message());
  return v1::ClusterStatus::Role_Name(status.role());
}

int CoordinatorGroup::WaitForLeader(absl::Duration bound, int other_than) const {
  const absl::Time deadline = absl::Now() + bound;
  do {
    for (int i = 0; i < size(); ++i) {
      if (i != other_than && RoleOf(i) == "LEADER") return i;
    }
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < deadline);
  return -1;
}

}  // namespace ddp::testing
