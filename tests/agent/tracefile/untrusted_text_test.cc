#include "agent/tracefile/untrusted_text.h"

#include <string>

#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

// A machine_name that clears the screen and retitles the terminal (issue 52)
// prints as text.
TEST(PrintableTextTest, TerminalEscapesArePrintedNotObeyed) {
  EXPECT_EQ(PrintableText("node\x1b[2J\x1b]0;owned\x07-a\r\n"),
            "node\\x1b[2J\\x1b]0;owned\\x07-a\\x0d\\x0a");
  EXPECT_EQ(PrintableText(std::string("a\0b\x7f", 4)), "a\\x00b\\x7f");
}

TEST(PrintableTextTest, C1ControlsAreEscapedAsCharactersAndAsLoneBytes) {
  EXPECT_EQ(PrintableText("x\xc2\x9b"
                          "2Jy"),
            "x\\xc2\\x9b2Jy");  // U+009B, CSI.
  EXPECT_EQ(PrintableText("x\x9b"
                          "2Jy"),
            "x\\x9b2Jy");  // 8-bit CSI.
}

TEST(PrintableTextTest, BidirectionalOverridesAreNamed) {
  EXPECT_EQ(PrintableText("evil\xe2\x80\xaegnp.exe"), "evil\\u{202e}gnp.exe");
  EXPECT_EQ(PrintableText("\xe2\x81\xa6x"), "\\u{2066}x");
}

TEST(PrintableTextTest, NamesInAnyScriptAndLatin1LettersAreKept) {
  EXPECT_EQ(PrintableText("nœud-東京-ü 🙂"), "nœud-東京-ü 🙂");
  EXPECT_EQ(PrintableText("caf\xe9"), "caf\xe9");
  EXPECT_EQ(PrintableText(""), "");
}

}  // namespace
}  // namespace ringside::agent
