#include "client/output_router.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

// A pipe standing in for the console.
class Console {
 public:
  Console() { EXPECT_EQ(pipe2(fds_, O_NONBLOCK), 0); }
  ~Console() {
    close(fds_[0]);
    close(fds_[1]);
  }
  int fd() const { return fds_[1]; }
  std::string Read() {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(fds_[0], buf, sizeof(buf))) > 0) out.append(buf, n);
    return out;
  }

 private:
  int fds_[2];
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OutputRouterTest, Write_Console_PrefixesWholeLinesAcrossChunks) {
  Console console;
  OutputRouter router({"", console.fd(), "[rank3]: ", 1024});
  ASSERT_TRUE(router.Open().ok());
  router.Write("hel");
  router.Write("lo\nwor");
  EXPECT_EQ(console.Read(), "[rank3]: hello\n");
  router.Write("ld\n\nend");
  router.Flush();
  EXPECT_EQ(console.Read(), "[rank3]: world\n[rank3]: \n[rank3]: end\n");
}

TEST(OutputRouterTest, Write_File_BytesUnchanged) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/out.log";
  {
    Console console;
    OutputRouter router({path, console.fd(), "[rank0]: ", 1024});
    ASSERT_TRUE(router.Open().ok());
    router.Write("a\nb");
    router.Write("c\n");
  }
  EXPECT_EQ(ReadFile(path), "a\nbc\n");
}

TEST(OutputRouterTest, Write_NoConsole_NothingPrinted) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/only.log";
  OutputRouter router({path, -1, "[rank0]: ", 1024});
  ASSERT_TRUE(router.Open().ok());
  router.Write("x\n");
  router.Flush();
  EXPECT_EQ(ReadFile(path), "x\n");
}

TEST(OutputRouterTest, Write_OverlongLine_SplitIntoBoundedPieces) {
  Console console;
  OutputRouter router({"", console.fd(), "P:", 4});
  ASSERT_TRUE(router.Open().ok());
  router.Write("abcdefghij");
  router.Flush();
  EXPECT_EQ(console.Read(), "P:abcd\nP:efgh\nP:ij\n");
}

TEST(OutputRouterTest, Open_BadPath_InternalErrorNamingPath) {
  OutputRouter router({"/no/such/dir/x.log", -1, "", 10});
  absl::Status s = router.Open();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("/no/such/dir/x.log"), std::string::npos);
}

}  // namespace
}  // namespace ddp::client
