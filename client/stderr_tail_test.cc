#include "client/stderr_tail.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

TEST(StderrTail, Append_ChunksSplitAnywhere_KeepsLines) {
  StderrTail tail;
  tail.Append("first li");
  tail.Append("ne\nsecond\nthi");
  tail.Append("rd");
  EXPECT_EQ(tail.Text(), "first line\nsecond\nthird");
}

TEST(StderrTail, Append_MoreLinesThanTheLimit_KeepsTheLast) {
  StderrTail tail(StderrTailLimits{3, 1 << 10});
  for (int i = 0; i < 10; ++i) tail.Append(absl::StrCat("line ", i, "\n"));
  EXPECT_EQ(tail.Text(), "line 7\nline 8\nline 9\n");
}

TEST(StderrTail, Append_MoreBytesThanTheLimit_StaysWithinIt) {
  StderrTail tail(StderrTailLimits{64, 20});
  tail.Append("aaaaaaaaaa\nbbbbbbbbbb\ncccccccccc\n");
  EXPECT_LE(tail.Text().size(), 20u);
  EXPECT_EQ(tail.Text(), "cccccccccc\n");
}

TEST(StderrTail, Append_EndlessLine_KeepsItsEnd) {
  StderrTail tail(StderrTailLimits{64, 8});
  tail.Append("0123456789abcdef");
  EXPECT_EQ(tail.Text(), "89abcdef");
}

TEST(SecretValuesIn, TokenAndSecretNames_AreFound_ShortAndPlainAreNot) {
  const std::vector<std::string> secrets = SecretValuesIn({{"DDP_TOKEN", "tok-123456"},
                                                           {"MY_db_password", "hunter22"},
                                                           {"HF_TOKEN", "x"},
                                                           {"RANK", "12345"}});
  EXPECT_EQ(secrets, (std::vector<std::string>{"tok-123456", "hunter22"}));
}

TEST(RedactSecrets, EveryOccurrence_IsReplaced) {
  EXPECT_EQ(RedactSecrets("token tok-123456 again tok-123456.", {"tok-123456"}),
            "token [REDACTED] again [REDACTED].");
  EXPECT_EQ(RedactSecrets("nothing here", {"tok-123456"}), "nothing here");
}

TEST(PythonTracebackIn, ScriptError_ReturnsFramesAndExceptionLine) {
  const std::string text =
      "step 1\n"
      "Traceback (most recent call last):\n"
      "  File \"train.py\", line 3, in <module>\n"
      "    main()\n"
      "ValueError: boom\n"
      "[rank0] afterwards\n";
  EXPECT_EQ(PythonTracebackIn(text),
            "Traceback (most recent call last):\n"
            "  File \"train.py\", line 3, in <module>\n"
            "    main()\n"
            "ValueError: boom");
}

TEST(PythonTracebackIn, ChainedExceptions_ReturnsTheLastTraceback) {
  const std::string text =
      "Traceback (most recent call last):\n"
      "  File \"a.py\", line 1, in <module>\n"
      "KeyError: 'x'\n"
      "\n"
      "During handling of the above exception, another exception occurred:\n"
      "\n"
      "Traceback (most recent call last):\n"
      "  File \"a.py\", line 3, in <module>\n"
      "RuntimeError: second\n";
  EXPECT_EQ(PythonTracebackIn(text),
            "Traceback (most recent call last):\n"
            "  File \"a.py\", line 3, in <module>\n"
            "RuntimeError: second");
}

TEST(PythonTracebackIn, NoTraceback_ReturnsEmpty) {
  EXPECT_EQ(PythonTracebackIn("python3: can't open file 'trian.py'\n"), "");
  EXPECT_EQ(PythonTracebackIn("quoted Traceback (most recent call last): in text\n"), "");
}

}  // namespace
}  // namespace ddp::client
