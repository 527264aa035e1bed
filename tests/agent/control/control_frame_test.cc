#include "agent/control/control_frame.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace ringside::agent {
namespace {

using Result = FrameReader::Result;

std::string Header(uint32_t length) {
  std::string h(4, '\0');
  for (int i = 0; i < 4; i++) h[i] = static_cast<char>(length >> (8 * i));
  return h;
}

void Feed(FrameReader* reader, const std::string& bytes) {
  ASSERT_LE(bytes.size(), reader->room());
  reader->Append(bytes.data(), bytes.size());
}

TEST(ControlFrameTest, EncodeFramePrefixesTheLittleEndianLength) {
  control::Request request;
  request.mutable_snapshot()->set_reason(std::string(300, 'x'));
  const std::string frame = EncodeFrame(request);
  const std::string payload = request.SerializeAsString();
  EXPECT_EQ(frame, Header(static_cast<uint32_t>(payload.size())) + payload);
}

TEST(ControlFrameTest, ReaderReturnsFramesSplitAnywhereAndBackToBack) {
  control::Request a, b;
  a.mutable_status();
  b.mutable_trigger()->set_name("oom");
  const std::string bytes = EncodeFrame(a) + EncodeFrame(b);
  FrameReader reader(1024);
  std::vector<std::string> payloads;
  std::string payload;
  for (char byte : bytes) {
    Feed(&reader, std::string(1, byte));
    while (reader.Next(&payload) == Result::kComplete) payloads.push_back(payload);
  }
  ASSERT_EQ(payloads.size(), 2u);
  EXPECT_EQ(payloads[0], a.SerializeAsString());
  EXPECT_EQ(payloads[1], b.SerializeAsString());
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(ControlFrameTest, ReaderNeverTakesMoreThanTheFrameBeingCollectedNeeds) {
  FrameReader reader(1024);
  EXPECT_EQ(reader.room(), 4u);
  Feed(&reader, Header(10));
  EXPECT_EQ(reader.room(), 10u);
  Feed(&reader, std::string(10, 'a'));
  EXPECT_EQ(reader.room(), 0u);  // A whole frame waits for Next().
}

TEST(ControlFrameTest, OversizedLengthIsReportedBeforeAnyOfItIsTaken) {
  FrameReader reader(64 * 1024);
  Feed(&reader, Header(0xfffffff0u));
  EXPECT_EQ(reader.room(), 0u);
  std::string payload;
  EXPECT_EQ(reader.Next(&payload), Result::kTooLarge);
  EXPECT_EQ(reader.announced_length(), 0xfffffff0u);
  EXPECT_EQ(reader.buffered(), 4u);
}

TEST(ControlFrameTest, FrameOfExactlyTheLimitIsAccepted) {
  FrameReader reader(8);
  Feed(&reader, Header(8));
  Feed(&reader, "12345678");
  std::string payload;
  EXPECT_EQ(reader.Next(&payload), Result::kComplete);
  EXPECT_EQ(payload, "12345678");
}

TEST(ControlFrameTest, DecodeRequestRejectsBytesThatDoNotParse) {
  const absl::StatusOr<control::Request> request = DecodeRequestUntrusted("\xff\xff\xff");
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(request.status().message().rfind("malformed request", 0), 0u)
      << request.status().message();
}

TEST(ControlFrameTest, DecodeRequestRejectsARequestOfNoKind) {
  const absl::StatusOr<control::Request> request = DecodeRequestUntrusted("");
  ASSERT_FALSE(request.ok());
  EXPECT_NE(request.status().message().find("malformed request: it asks for nothing"),
            std::string::npos)
      << request.status().message();
}

TEST(ControlFrameTest, DecodeRequestRejectsAReasonThatIsNotUtf8) {
  for (const std::string& bad : {std::string("\xff"), std::string("ok\xc0\xaf"),
                                 std::string("\xed\xa0\x80"), std::string("\xe2\x82")}) {
    control::Request sent;
    sent.mutable_snapshot()->set_reason(bad);
    const absl::StatusOr<control::Request> request =
        DecodeRequestUntrusted(sent.SerializeAsString());
    ASSERT_FALSE(request.ok()) << "accepted " << absl::CEscape(bad);
    EXPECT_EQ(request.status().message(),
              "malformed request: its snapshot reason or trigger name is not UTF-8 text");
  }
}

TEST(ControlFrameTest, DecodeRequestAcceptsUtf8Text) {
  control::Request sent;
  sent.mutable_trigger()->set_name("d\xc3\xa9j\xc3\xa0 vu \xe2\x82\xac \xf0\x9f\x94\xa5");
  const absl::StatusOr<control::Request> request = DecodeRequestUntrusted(sent.SerializeAsString());
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->trigger().name(), sent.trigger().name());
}

TEST(ControlFrameTest, DecodeRequestReturnsTheRequest) {
  control::Request sent;
  sent.mutable_snapshot()->set_reason("manual");
  sent.mutable_snapshot()->set_wait(true);
  const absl::StatusOr<control::Request> request = DecodeRequestUntrusted(sent.SerializeAsString());
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->snapshot().reason(), "manual");
  EXPECT_TRUE(request->snapshot().wait());
}

TEST(IsUtf8Test, AcceptsWellFormedTextOnly) {
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8("plain"));
  EXPECT_TRUE(IsUtf8("d\xc3\xa9j\xc3\xa0 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsUtf8("\xff"));
  EXPECT_FALSE(IsUtf8("\xc3"));              // Cut short.
  EXPECT_FALSE(IsUtf8("\xe2\x82"));          // Cut short.
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));          // Overlong '/'.
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));      // A surrogate.
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));  // Above U+10FFFF.
  EXPECT_FALSE(IsUtf8("a\x80"));             // A lone continuation byte.
}

}  // namespace
}  // namespace ringside::agent
