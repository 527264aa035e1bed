#include "buffer/trace_packet.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringside/trace/trace.pb.h"

namespace ringside::buffer {
namespace {

using Status = PacketFrame::Status;

PacketFrame Read(const std::string& bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  return ReadPacketFrame(p, p + bytes.size());
}

// Framed packets, as every file ringside writes holds them, parse as a
// Trace with libprotobuf; and ReadPacketFrame walks them frame by frame.
TEST(PacketFrameTest, FramedPacketsAreATraceAndAreReadBackFrameByFrame) {
  // Packets of one- to three-byte lengths, and an empty one.
  std::vector<std::string> packets;
  for (size_t marker : {0, 1, 120, 200, 70000}) {
    trace::TracePacket p;
    if (marker > 0) p.set_synchronization_marker(std::string(marker, 's'));
    packets.push_back(p.SerializeAsString());
  }
  std::string file;
  for (const std::string& p : packets) AppendFramedPacket(p, &file);

  trace::Trace parsed;
  ASSERT_TRUE(parsed.ParseFromString(file));
  EXPECT_EQ(parsed.packet_size(), 5);

  size_t at = 0;
  for (const std::string& p : packets) {
    const PacketFrame f = Read(file.substr(at));
    ASSERT_EQ(f.status, Status::kWhole) << "packet of " << p.size() << " bytes";
    EXPECT_EQ(f.packet_size, p.size());
    EXPECT_EQ(file.substr(at + f.header_size, f.packet_size), p);
    at += f.size();
  }
  EXPECT_EQ(at, file.size());
}

// A file cut anywhere (a kill mid-write) ends in a cut frame, never a whole
// one and never "not a packet"; once the header is there, the frame's size
// is known before its packet is.
TEST(PacketFrameTest, AFrameCutAnywhereIsCutAndNamesItsSizeOnceItsHeaderIsWhole) {
  std::string frame;
  AppendFramedPacket(std::string(300, 'p'), &frame);  // Header: 0x0a, 2 length bytes.
  ASSERT_EQ(frame.size(), 303u);
  for (size_t cut = 0; cut < frame.size(); cut++) {
    const PacketFrame f = Read(frame.substr(0, cut));
    EXPECT_EQ(f.status, Status::kCut) << cut;
    if (cut >= 3) {
      EXPECT_EQ(f.header_size, 3u) << cut;
      EXPECT_EQ(f.size(), 303u) << cut;
    } else {
      EXPECT_EQ(f.header_size, 0u) << cut;
    }
  }
  EXPECT_EQ(Read(frame).status, Status::kWhole);
}

TEST(PacketFrameTest, OtherTagsAndOverlongLengthsAreNotPackets) {
  // Field 2, length-delimited; field 1 as a varint.
  EXPECT_EQ(Read(std::string("\x12\x01x", 3)).status, Status::kNotAPacket);
  EXPECT_EQ(Read(std::string("\x08\x01", 2)).status, Status::kNotAPacket);
  // A length of 11 varint bytes: no such varint, whatever follows.
  EXPECT_EQ(Read("\x0a" + std::string(11, '\xff') + "x").status, Status::kNotAPacket);
  // Ten continuation bytes: longer than any varint, though the bytes end there.
  EXPECT_EQ(Read("\x0a" + std::string(10, '\x80')).status, Status::kNotAPacket);
  // Nine: the tenth byte may still come.
  EXPECT_EQ(Read("\x0a" + std::string(9, '\x80')).status, Status::kCut);
  // A length as large as a varint holds: cut (the bytes end long before), no overflow.
  const PacketFrame huge = Read("\x0a" + std::string(9, '\xff') + "\x01");
  EXPECT_EQ(huge.status, Status::kCut);
  EXPECT_EQ(huge.header_size, 11u);
  EXPECT_EQ(huge.packet_size, UINT64_MAX);
}

}  // namespace
}  // namespace ringside::buffer
