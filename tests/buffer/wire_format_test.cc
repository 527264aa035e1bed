#include "buffer/wire_format.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "google/protobuf/io/coded_stream.h"
#include "gtest/gtest.h"

namespace ringside::buffer {
namespace {

constexpr uint64_t kBoundaries[] = {0,
                                    1,
                                    127,
                                    128,
                                    16383,
                                    16384,
                                    (uint64_t{1} << 28) - 1,
                                    uint64_t{1} << 28,
                                    std::numeric_limits<uint32_t>::max(),
                                    uint64_t{1} << 32,
                                    (uint64_t{1} << 63) - 1,
                                    uint64_t{1} << 63,
                                    std::numeric_limits<uint64_t>::max()};

std::string Bytes(std::initializer_list<uint8_t> bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::string EncodeVarInt(uint64_t value) {
  uint8_t buf[kMaxVarIntSize];
  uint8_t* end = WriteVarInt(value, buf);
  return std::string(buf, end);
}

const uint8_t* Begin(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }
const uint8_t* End(const std::string& s) { return Begin(s) + s.size(); }

TEST(WireFormatTest, VarIntRoundTripsAtEveryBoundary) {
  for (uint64_t value : kBoundaries) {
    SCOPED_TRACE(value);
    const std::string encoded = EncodeVarInt(value);
    uint64_t decoded = ~value;
    EXPECT_EQ(ParseVarInt(Begin(encoded), End(encoded), &decoded), encoded.size());
    EXPECT_EQ(decoded, value);
  }
}

TEST(WireFormatTest, VarIntSizeGrowsBySevenBitGroups) {
  EXPECT_EQ(EncodeVarInt(0), Bytes({0x00}));
  EXPECT_EQ(EncodeVarInt(127), Bytes({0x7f}));
  EXPECT_EQ(EncodeVarInt(128), Bytes({0x80, 0x01}));
  EXPECT_EQ(EncodeVarInt(300), Bytes({0xac, 0x02}));
  EXPECT_EQ(EncodeVarInt(std::numeric_limits<uint32_t>::max()),
            Bytes({0xff, 0xff, 0xff, 0xff, 0x0f}));
  EXPECT_EQ(EncodeVarInt(std::numeric_limits<uint64_t>::max()),
            Bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  for (uint64_t value : kBoundaries) {
    EXPECT_EQ(VarIntSize(value), EncodeVarInt(value).size()) << value;
  }
}

TEST(WireFormatTest, VarIntsAreEncodedAsLibprotobufEncodesThem) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 10000; i++) {
    // Values of every length, not only the huge ones a uniform draw gives.
    const uint64_t value = rng() >> (rng() % 64);
    uint8_t theirs[kMaxVarIntSize];
    uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(value, theirs);
    ASSERT_EQ(EncodeVarInt(value), std::string(theirs, end)) << value;
  }
}

TEST(WireFormatTest, AppendVarIntWritesWhatWriteVarIntWrites) {
  std::string appended = "prefix";
  for (uint64_t value : kBoundaries) AppendVarInt(value, &appended);
  std::string written = "prefix";
  for (uint64_t value : kBoundaries) written += EncodeVarInt(value);
  EXPECT_EQ(appended, written);
}

TEST(WireFormatTest, TruncatedVarIntIsRejectedAndNotConsumed) {
  for (uint64_t value : kBoundaries) {
    const std::string encoded = EncodeVarInt(value);
    for (size_t cut = 0; cut < encoded.size(); cut++) {
      SCOPED_TRACE(testing::Message() << value << " cut to " << cut);
      uint64_t decoded = 0;
      EXPECT_EQ(ParseVarInt(Begin(encoded), Begin(encoded) + cut, &decoded), 0u);
      const uint8_t* p = Begin(encoded);
      EXPECT_FALSE(ReadVarInt(&p, Begin(encoded) + cut, &decoded));
      EXPECT_EQ(p, Begin(encoded));
    }
  }
}

TEST(WireFormatTest, VarIntLongerThanTenBytesIsRejected) {
  // Eleven bytes: ten with the continuation bit, then a terminator.
  std::string overlong(10, '\x80');
  overlong.push_back('\x00');
  uint64_t decoded = 0;
  EXPECT_EQ(ParseVarInt(Begin(overlong), End(overlong), &decoded), 0u);
  const uint8_t* p = Begin(overlong);
  EXPECT_FALSE(ReadVarInt(&p, End(overlong), &decoded));
  EXPECT_EQ(p, Begin(overlong));
}

TEST(WireFormatTest, ReadVarIntAdvancesPastExactlyOneVarInt) {
  const std::string two = EncodeVarInt(300) + EncodeVarInt(7);
  const uint8_t* p = Begin(two);
  uint64_t value = 0;
  ASSERT_TRUE(ReadVarInt(&p, End(two), &value));
  EXPECT_EQ(value, 300u);
  EXPECT_EQ(p, Begin(two) + 2);
  ASSERT_TRUE(ReadVarInt(&p, End(two), &value));
  EXPECT_EQ(value, 7u);
  EXPECT_EQ(p, End(two));
}

TEST(WireFormatTest, ParseVarIntRejectsVarIntsLongerThanTheGivenMaximum) {
  const std::string five_bytes = EncodeVarInt(uint64_t{1} << 28);
  ASSERT_EQ(five_bytes.size(), 5u);
  uint64_t decoded = 0;
  EXPECT_EQ(ParseVarInt(Begin(five_bytes), End(five_bytes), &decoded, 4), 0u);
  EXPECT_EQ(ParseVarInt(Begin(five_bytes), End(five_bytes), &decoded, 5), 5u);
}

TEST(WireFormatTest, RedundantVarIntIsFourBytesWithContinuationBitsOnTheFirstThree) {
  uint8_t b[kRedundantVarIntSize];
  WriteRedundantVarInt(0, b);
  EXPECT_EQ(std::string(b, b + 4), Bytes({0x80, 0x80, 0x80, 0x00}));
  WriteRedundantVarInt(5, b);
  EXPECT_EQ(std::string(b, b + 4), Bytes({0x85, 0x80, 0x80, 0x00}));
  WriteRedundantVarInt(300, b);
  EXPECT_EQ(std::string(b, b + 4), Bytes({0xac, 0x82, 0x80, 0x00}));
  WriteRedundantVarInt(kMaxRedundantVarIntValue, b);
  EXPECT_EQ(std::string(b, b + 4), Bytes({0xff, 0xff, 0xff, 0x7f}));
}

TEST(WireFormatTest, RedundantVarIntIsAnOrdinaryVarIntToAReader) {
  for (uint32_t value : {0u, 1u, 127u, 128u, 300u, 1u << 21, kMaxRedundantVarIntValue}) {
    uint8_t b[kRedundantVarIntSize];
    WriteRedundantVarInt(value, b);
    uint64_t generic = 0;
    EXPECT_EQ(ParseVarInt(b, b + 4, &generic), 4u) << value;
    EXPECT_EQ(generic, value);
    uint32_t redundant = 0;
    EXPECT_TRUE(ReadRedundantVarInt(b, b + 4, &redundant)) << value;
    EXPECT_EQ(redundant, value);
  }
}

TEST(WireFormatTest, ReadRedundantVarIntRejectsEveryOtherForm) {
  uint32_t value = 0;
  const std::string short_form = Bytes({0x05, 0x00, 0x00, 0x00});
  EXPECT_FALSE(ReadRedundantVarInt(Begin(short_form), End(short_form), &value));
  const std::string three_bytes = Bytes({0x85, 0x80, 0x80});
  EXPECT_FALSE(ReadRedundantVarInt(Begin(three_bytes), End(three_bytes), &value));
  const std::string continues = Bytes({0x85, 0x80, 0x80, 0x80, 0x00});
  EXPECT_FALSE(ReadRedundantVarInt(Begin(continues), End(continues), &value));
}

TEST(WireFormatTest, TagHoldsFieldNumberAndWireType) {
  EXPECT_EQ(MakeTag(1, WireType::kLengthDelimited), 0x0au);
  EXPECT_EQ(MakeTag(2, WireType::kVarInt), 0x10u);
  const uint64_t tag = MakeTag(kMaxFieldNumber, WireType::kFixed32);
  EXPECT_EQ(TagFieldNumber(tag), kMaxFieldNumber);
  EXPECT_EQ(TagWireType(tag), 5);
  uint8_t b[kMaxTagSize];
  EXPECT_EQ(WriteTag(kMaxFieldNumber, WireType::kFixed32, b), b + kMaxTagSize);
}

TEST(WireFormatTest, FixedWidthValuesAreLittleEndian) {
  uint8_t b[8];
  EXPECT_EQ(WriteFixed32(0x04030201, b), b + 4);
  EXPECT_EQ(std::string(b, b + 4), Bytes({0x01, 0x02, 0x03, 0x04}));
  EXPECT_EQ(WriteFixed64(0x0807060504030201, b), b + 8);
  EXPECT_EQ(std::string(b, b + 8), Bytes({0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}));
}

TEST(WireFormatTest, AppendVarIntFieldWritesTagThenValue) {
  std::string out;
  AppendVarIntField(3, 300, &out);
  EXPECT_EQ(out, Bytes({0x18, 0xac, 0x02}));
}

TEST(WireFormatTest, LengthDelimitedFieldCarriesItsSizeAsAVarInt) {
  std::string out;
  AppendLengthDelimitedField(1, "abc", &out);
  EXPECT_EQ(out, Bytes({0x0a, 0x03}) + "abc");
  out.clear();
  const std::string big(200, 'x');
  AppendLengthDelimitedField(1, big, &out);
  EXPECT_EQ(out, Bytes({0x0a, 0xc8, 0x01}) + big);
}

TEST(WireFormatTest, ReadFieldReadsEachWireTypeInTurn) {
  std::string msg;
  AppendVarIntField(1, 300, &msg);
  uint8_t fixed[kMaxTagSize + 8];
  msg.append(reinterpret_cast<const char*>(fixed),
             WriteFixed64(0x1122334455667788, WriteTag(2, WireType::kFixed64, fixed)) - fixed);
  msg.append(reinterpret_cast<const char*>(fixed),
             WriteFixed32(0xaabbccdd, WriteTag(3, WireType::kFixed32, fixed)) - fixed);
  AppendLengthDelimitedField(1000, "payload", &msg);

  const uint8_t* p = Begin(msg);
  Field f;
  ASSERT_TRUE(ReadField(&p, End(msg), &f));
  EXPECT_EQ(f.number, 1u);
  EXPECT_EQ(f.type, WireType::kVarInt);
  EXPECT_EQ(f.int_value, 300u);
  ASSERT_TRUE(ReadField(&p, End(msg), &f));
  EXPECT_EQ(f.number, 2u);
  EXPECT_EQ(f.type, WireType::kFixed64);
  EXPECT_EQ(f.int_value, 0x1122334455667788u);
  ASSERT_TRUE(ReadField(&p, End(msg), &f));
  EXPECT_EQ(f.number, 3u);
  EXPECT_EQ(f.type, WireType::kFixed32);
  EXPECT_EQ(f.int_value, 0xaabbccddu);
  ASSERT_TRUE(ReadField(&p, End(msg), &f));
  EXPECT_EQ(f.number, 1000u);
  EXPECT_EQ(f.type, WireType::kLengthDelimited);
  EXPECT_EQ(f.bytes, "payload");
  EXPECT_EQ(p, End(msg));
}

TEST(WireFormatTest, ReadFieldRejectsEveryTruncationOfAField) {
  std::vector<std::string> fields(4);
  AppendVarIntField(1, 300, &fields[0]);
  fields[1] = Bytes({0x11, 1, 2, 3, 4, 5, 6, 7, 8});  // Field 2, fixed64.
  fields[2] = Bytes({0x1d, 1, 2, 3, 4});              // Field 3, fixed32.
  AppendLengthDelimitedField(4, "payload", &fields[3]);
  for (const std::string& field : fields) {
    for (size_t cut = 0; cut < field.size(); cut++) {
      const uint8_t* p = Begin(field);
      Field f;
      EXPECT_FALSE(ReadField(&p, Begin(field) + cut, &f)) << cut;
      EXPECT_EQ(p, Begin(field));
    }
  }
}

TEST(WireFormatTest, ReadFieldRejectsALengthRunningPastTheEnd) {
  // Declares 100 bytes and holds 3; and a length near 2^64 that must not wrap.
  for (const std::string& msg :
       {Bytes({0x0a, 0x64, 'a', 'b', 'c'}),
        Bytes({0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'a'})}) {
    const uint8_t* p = Begin(msg);
    Field f;
    EXPECT_FALSE(ReadField(&p, End(msg), &f));
  }
}

TEST(WireFormatTest, ReadFieldRejectsGroupsAndUnknownWireTypes) {
  for (uint8_t type : {3, 4, 6, 7}) {
    const std::string msg = Bytes({static_cast<uint8_t>(1 << 3 | type), 0, 0, 0, 0, 0, 0, 0, 0});
    const uint8_t* p = Begin(msg);
    Field f;
    EXPECT_FALSE(ReadField(&p, End(msg), &f)) << int{type};
  }
}

TEST(WireFormatTest, ReadFieldRejectsFieldNumbersOutsideTheValidRange) {
  std::string zero = Bytes({0x00, 0x01});  // Field 0, varint.
  std::string too_big;
  AppendVarInt(MakeTag(kMaxFieldNumber, WireType::kVarInt) + 8, &too_big);
  too_big.push_back('\x01');
  for (const std::string& msg : {zero, too_big}) {
    const uint8_t* p = Begin(msg);
    Field f;
    EXPECT_FALSE(ReadField(&p, End(msg), &f));
  }
}

TEST(WireFormatTest, PackedVarIntsAreCountedOncePerValueWhateverTheirLength) {
  std::string packed;
  for (uint64_t value : kBoundaries) AppendVarInt(value, &packed);
  EXPECT_EQ(CountPackedVarInts(packed), std::size(kBoundaries));
  // A varint cut short by the end of the payload is not a value.
  EXPECT_EQ(CountPackedVarInts(packed.substr(0, packed.size() - 1)), std::size(kBoundaries) - 1);
  EXPECT_EQ(CountPackedVarInts(""), 0u);
}

TEST(WireFormatTest, VarIntDecoderTakesBytesOneAtATime) {
  for (uint64_t value : kBoundaries) {
    SCOPED_TRACE(value);
    const std::string encoded = EncodeVarInt(value);
    VarIntDecoder d;
    for (size_t i = 0; i + 1 < encoded.size(); i++) {
      ASSERT_EQ(d.Feed(static_cast<uint8_t>(encoded[i])), VarIntDecoder::State::kNeedMore);
    }
    ASSERT_EQ(d.Feed(static_cast<uint8_t>(encoded.back())), VarIntDecoder::State::kDone);
    EXPECT_EQ(d.value(), value);
    EXPECT_EQ(d.size(), encoded.size());
  }
}

TEST(WireFormatTest, VarIntDecoderRejectsTheTenthContinuationByte) {
  VarIntDecoder d;
  for (int i = 0; i < 9; i++) ASSERT_EQ(d.Feed(0x80), VarIntDecoder::State::kNeedMore);
  EXPECT_EQ(d.Feed(0x80), VarIntDecoder::State::kOverlong);
}

TEST(WireFormatTest, VarIntDecoderStartsOverAfterReset) {
  VarIntDecoder d;
  ASSERT_EQ(d.Feed(0xff), VarIntDecoder::State::kNeedMore);
  d.Reset();
  ASSERT_EQ(d.Feed(0x05), VarIntDecoder::State::kDone);
  EXPECT_EQ(d.value(), 5u);
  EXPECT_EQ(d.size(), 1u);
}

}  // namespace
}  // namespace ringside::buffer
