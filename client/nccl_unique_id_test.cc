#include "client/nccl_unique_id.h"

#include <unistd.h>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

// NCCL is installed on the build machines (/usr/local/cuda/lib64/libnccl.so.2);
// ncclGetUniqueId needs no GPU.
TEST(GenerateNcclUniqueIdTest, Generate_NcclInstalled_128NonZeroBytesFreshEachCall) {
  auto first = GenerateNcclUniqueId();
  // Skip only where NCCL is truly absent; where it is installed a NOT_FOUND is
  // a failure.
  if (absl::IsNotFound(first.status()) && access("/usr/local/cuda/lib64/libnccl.so.2", F_OK) != 0) {
    GTEST_SKIP() << first.status();
  }
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = GenerateNcclUniqueId();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->size(), kNcclUniqueIdBytes);
  EXPECT_NE(*first, std::string(kNcclUniqueIdBytes, '\0'));
  EXPECT_NE(*first, *second);
}

TEST(GenerateNcclUniqueIdTest, Generate_NoLibrary_NotFoundNamingCandidates) {
  NcclLibraryOptions options;
  options.candidates = {"libdefinitely-not-nccl.so.9"};
  auto id = GenerateNcclUniqueId(options);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(id.status().message().find("libdefinitely-not-nccl.so.9"), std::string::npos);
}

TEST(GenerateNcclUniqueIdTest, Generate_LibraryWithoutSymbol_NotFound) {
  NcclLibraryOptions options;
  options.candidates = {"libdl.so.2"};
  auto id = GenerateNcclUniqueId(options);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(id.status().message().find("no ncclGetUniqueId"), std::string::npos);
}

TEST(HexTest, EncodeDecode_RoundTrip) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  const std::string hex = HexEncode(bytes);
  EXPECT_EQ(hex.size(), 512u);
  EXPECT_EQ(hex.substr(0, 6), "000102");
  EXPECT_EQ(hex.substr(hex.size() - 2), "ff");
  auto back = HexDecode(hex);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, bytes);
  EXPECT_EQ(*HexDecode("ABcd"), "\xab\xcd");
}

TEST(HexTest, Decode_Malformed_InvalidArgument) {
  EXPECT_EQ(HexDecode("abc").status().code(), absl::StatusCode::kInvalidArgument);
  auto bad = HexDecode("zz00");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("position 0"), std::string::npos);
}

}  // namespace
}  // namespace ddp::client
