#include "buffer/durable_store.h"

#include <malloc.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "buffer/chunk_abi.h"
#include "buffer/trace_buffer.h"
#include "gtest/gtest.h"
#include "tests/testing/chunk_builder.h"

namespace ringside::buffer {
namespace {

using Kind = DurableStore::Kind;

struct Seen {
  Kind kind;
  uint64_t id;
  std::string packet;
};

std::vector<Seen> All(DurableStore& s, bool changed_only = false, bool mark_read = false) {
  std::vector<Seen> out;
  s.ForEach(
      [&](Kind k, uint64_t id, std::string_view p) {
        out.push_back({k, id, std::string(p)});
      },
      changed_only, mark_read);
  return out;
}

// The packets of All(), in its order.
std::vector<std::string> Packets(DurableStore& s, bool changed_only = false,
                                 bool mark_read = false) {
  std::vector<std::string> out;
  for (const Seen& e : All(s, changed_only, mark_read)) out.push_back(e.packet);
  return out;
}

TEST(DurableStoreTest, ARenamedProcessReplacesItsEntry) {
  DurableStore s(1 << 20, 1 << 20);
  s.Put(Kind::kProcess, 42, "bash");
  s.Put(Kind::kThread, 42, "bash-thread");
  s.Put(Kind::kProcess, 42, "python3");  // exec'd
  const std::vector<Seen> all = All(s);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].packet, "python3");  // In the order last written.
  EXPECT_EQ(s.stats().replaced, 1u);
  EXPECT_EQ(s.stats().entries, 2u);
  EXPECT_EQ(s.stats().max_bytes, s.stats().bytes);  // Grew with each write.
}

TEST(DurableStoreTest, AnEndedEntryStaysUntilTheRingHasMovedPastIt) {
  const size_t ring = 4 << 20;
  DurableStore s(1 << 20, ring);
  s.Put(Kind::kProcess, 7, "short-lived");
  s.MarkEnded(Kind::kProcess, 7);
  // The end is pinned at the second drain after it: data written before the
  // end may still have been in a producer's open chunk at the first.
  s.Drained(0);
  s.Drained(1000);
  s.Drained(1000 + ring);  // Data from before the end may still be in the ring.
  EXPECT_TRUE(s.Contains(Kind::kProcess, 7));
  s.Drained(1000 + ring + ring / 8 + 1);
  EXPECT_FALSE(s.Contains(Kind::kProcess, 7));
  EXPECT_EQ(s.stats().compacted, 1u);
  EXPECT_EQ(s.stats().bytes, 0u);
}

TEST(DurableStoreTest, AnEndIsNotPinnedBeforeTwoDrains) {
  const size_t ring = 1 << 20;
  DurableStore s(1 << 20, ring);
  s.Put(Kind::kThread, 9, "t");
  s.MarkEnded(Kind::kThread, 9);
  // A single drain with the ring far ahead must not drop it: the data of
  // its last moments may only arrive with the next drain.
  s.Drained(100 * ring);
  EXPECT_TRUE(s.Contains(Kind::kThread, 9));
  s.Drained(100 * ring + 10);
  EXPECT_TRUE(s.Contains(Kind::kThread, 9));
}

// Ends pinned at different drains go each at its own time, whatever order
// their keys sort in, and a live entry beside them stays.
TEST(DurableStoreTest, EntriesThatEndedAtDifferentDrainsGoEachWhenTheRingIsPastIt) {
  const size_t ring = 1 << 20;
  const uint64_t past = ring + ring / 8 + 1;
  DurableStore s(1 << 20, ring);
  s.Put(Kind::kThread, 1, "lives on");
  s.Put(Kind::kThread, 30, "ends first");
  s.Put(Kind::kThread, 20, "ends second");
  s.Put(Kind::kProcess, 10, "ends third");
  s.MarkEnded(Kind::kThread, 30);
  s.Drained(0);
  s.Drained(1000);  // 30's end pinned at 1000.
  s.MarkEnded(Kind::kThread, 20);
  s.MarkEnded(Kind::kProcess, 10);
  s.Drained(2000);
  s.Drained(5000);  // Theirs at 5000.
  s.Drained(1000 + past);
  EXPECT_FALSE(s.Contains(Kind::kThread, 30));
  EXPECT_TRUE(s.Contains(Kind::kThread, 20));
  EXPECT_TRUE(s.Contains(Kind::kProcess, 10));
  s.Drained(5000 + past);
  EXPECT_FALSE(s.Contains(Kind::kThread, 20));
  EXPECT_FALSE(s.Contains(Kind::kProcess, 10));
  EXPECT_TRUE(s.Contains(Kind::kThread, 1));
  EXPECT_EQ(s.stats().compacted, 3u);
  EXPECT_EQ(s.stats().entries, 1u);
}

TEST(DurableStoreTest, AReusedPidGetsItsOwnEntryWhileTheOldOneIsKept) {
  DurableStore s(1 << 20, 1 << 20);
  s.Put(Kind::kProcess, 100, "old");
  s.MarkEnded(Kind::kProcess, 100);
  s.Put(Kind::kProcess, 100, "new");
  const std::vector<Seen> all = All(s);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].packet, "old");
  EXPECT_EQ(all[1].packet, "new");
  s.Put(Kind::kProcess, 100, "new-renamed");  // Replaces the live one only.
  EXPECT_EQ(All(s)[1].packet, "new-renamed");
  EXPECT_EQ(All(s).size(), 2u);
}

// Records are read CPU by CPU: the exec of a short-lived process may be
// read after its exit. It rewrites the ended entry, whose end stays where
// it was, instead of adding a second one.
TEST(DurableStoreTest, ALateDescriptionOfAnEndedEntityReplacesItsEntryAndKeepsItsEnd) {
  const size_t ring = 1 << 20;
  DurableStore s(1 << 20, ring);
  s.Put(Kind::kProcess, 7, "forked");
  s.MarkEnded(Kind::kProcess, 7);
  s.Drained(0);
  s.Drained(1000);  // The end is pinned here.
  s.PutEnded(Kind::kProcess, 7, "exec'd");
  std::vector<Seen> all = All(s);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].packet, "exec'd");
  EXPECT_EQ(s.stats().replaced, 1u);
  s.Drained(1000 + ring + ring / 8 + 1);
  EXPECT_FALSE(s.Contains(Kind::kProcess, 7));
  EXPECT_EQ(s.stats().bytes, 0u);

  // An entity whose end came before any description of it: an ended entry.
  s.MarkEnded(Kind::kThread, 8);
  s.PutEnded(Kind::kThread, 8, "named-late");
  ASSERT_EQ(All(s).size(), 1u);
  s.Put(Kind::kThread, 8, "a reused tid");  // A new entity: its own entry.
  all = All(s);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].packet, "named-late");
  s.Drained(2 * ring);
  s.Drained(2 * ring + 1);
  s.Drained(4 * ring);
  all = All(s);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].packet, "a reused tid");
}

// A capacity with room for `entries` entries of 100-byte packets and for
// the index of `live` live ones (a hash table, whose size steps with how
// many it holds).
size_t RoomFor(size_t entries, size_t live) {
  const std::string payload(100, 'x');
  DurableStore probe(1 << 30, 1 << 30);
  for (uint64_t id = 1; id <= live; id++) probe.Put(Kind::kThread, id, payload);
  const size_t index_bytes = probe.stats().bytes - live * DurableStore::EntryCost(100);
  return entries * DurableStore::EntryCost(100) + index_bytes;
}

TEST(DurableStoreTest, WhenFullEndedEntriesGoFirstThenLiveOnesAsCountedLoss) {
  const std::string payload(100, 'x');
  // Room for ten entries (each costs its bytes plus bookkeeping), up to 11
  // of them live.
  DurableStore s(RoomFor(10, 11), 1 << 30);
  for (uint64_t pid = 1; pid <= 5; pid++) {
    s.Put(Kind::kProcess, pid, payload);
    s.MarkEnded(Kind::kProcess, pid);  // Ended, but the ring has not moved.
  }
  for (uint64_t pid = 6; pid <= 10; pid++) s.Put(Kind::kProcess, pid, payload);
  EXPECT_EQ(s.stats().entries, 10u);
  s.Put(Kind::kProcess, 11, payload);
  EXPECT_EQ(s.stats().evicted_ended, 1u);
  EXPECT_FALSE(s.Contains(Kind::kProcess, 1));  // The oldest ended one.
  for (uint64_t pid = 12; pid <= 16; pid++) s.Put(Kind::kProcess, pid, payload);
  EXPECT_EQ(s.stats().evicted_ended, 5u);  // All ended ones are gone now...
  EXPECT_EQ(s.stats().evicted_live, 1u);   // ...so the oldest live one went, counted.
  EXPECT_FALSE(s.Contains(Kind::kProcess, 6));
  EXPECT_TRUE(s.Contains(Kind::kProcess, 16));
  EXPECT_LE(s.stats().max_bytes, s.stats().capacity);
  // Tracing never stops: a write always lands.
  s.Put(Kind::kThread, 99, payload);
  EXPECT_TRUE(s.Contains(Kind::kThread, 99));
  // Only an entry larger than the whole store is refused, and counted.
  s.Put(Kind::kThread, 100, std::string(s.stats().capacity, 'y'));
  EXPECT_EQ(s.stats().rejected, 1u);
}

// A process described at its start that runs on while short-lived ones come
// and go, then ends: its records are the newest in the ring, so it is the
// last ended entry to go for room, whenever it was written.
TEST(DurableStoreTest, WhenFullTheEntryThatEndedFirstGoesFirstNotTheOldestWritten) {
  const std::string payload(100, 'x');
  DurableStore s(RoomFor(10, 4), 1 << 30);  // Up to 4 live.
  s.Put(Kind::kProcess, 1, payload);        // The long-lived one, written first.
  for (uint64_t pid = 2; pid <= 9; pid++) {
    s.Put(Kind::kProcess, pid, payload);
    s.MarkEnded(Kind::kProcess, pid);
  }
  s.MarkEnded(Kind::kProcess, 1);  // It ends last.
  s.Put(Kind::kProcess, 10, payload);
  EXPECT_EQ(s.stats().evicted_ended, 0u);
  s.Put(Kind::kProcess, 11, payload);
  s.Put(Kind::kProcess, 12, payload);
  EXPECT_EQ(s.stats().evicted_ended, 2u);
  EXPECT_FALSE(s.Contains(Kind::kProcess, 2));  // The first to end...
  EXPECT_FALSE(s.Contains(Kind::kProcess, 3));  // ...and the second.
  EXPECT_TRUE(s.Contains(Kind::kProcess, 1)) << "the last to end went for room first";
  // A late description keeps the entry's place in the order of ends.
  s.PutEnded(Kind::kProcess, 4, "exec'd late");
  s.Put(Kind::kProcess, 13, payload);
  EXPECT_FALSE(s.Contains(Kind::kProcess, 4));
  EXPECT_TRUE(s.Contains(Kind::kProcess, 5));
}

// A machine with more live tasks than the store holds: each new entry
// takes the place of the live one written least recently (a rewrite makes
// an entry the newest, an end takes it out of the running), in a clone as
// in the store it was copied from.
TEST(DurableStoreTest, WhenFullOfLiveEntriesTheOneWrittenLeastRecentlyGoesInAClonesToo) {
  const std::string payload(100, 'x');
  DurableStore s(RoomFor(5, 6), 1 << 30);
  for (uint64_t tid = 1; tid <= 5; tid++) s.Put(Kind::kThread, tid, payload);
  s.Put(Kind::kThread, 1, payload);  // Renamed: now the newest.
  s.MarkEnded(Kind::kThread, 3);
  s.Put(Kind::kThread, 6, payload);
  EXPECT_EQ(s.stats().evicted_ended, 1u);  // The ended one first...
  EXPECT_FALSE(s.Contains(Kind::kThread, 3));
  s.Put(Kind::kThread, 7, payload);
  EXPECT_EQ(s.stats().evicted_live, 1u);  // ...then the least recently written.
  EXPECT_FALSE(s.Contains(Kind::kThread, 2));
  EXPECT_TRUE(s.Contains(Kind::kThread, 1));
  std::unique_ptr<DurableStore> c = s.Clone();  // Oldest first: 4, 5, 1, 6, 7.
  s.Put(Kind::kThread, 5, payload);             // Here only: 4, 1, 6, 7, 5.
  for (DurableStore* store : {&s, c.get()}) {
    store->Put(Kind::kThread, 4, payload);  // Renamed in both.
    store->Put(Kind::kThread, 8, payload);
    store->Put(Kind::kThread, 9, payload);
    EXPECT_EQ(store->stats().evicted_live, 3u);
  }
  for (uint64_t tid : {4, 7, 8, 9}) {
    EXPECT_TRUE(s.Contains(Kind::kThread, tid)) << tid;
    EXPECT_TRUE(c->Contains(Kind::kThread, tid)) << tid;
  }
  EXPECT_FALSE(s.Contains(Kind::kThread, 1));
  EXPECT_FALSE(s.Contains(Kind::kThread, 6));
  EXPECT_TRUE(s.Contains(Kind::kThread, 5));
  EXPECT_FALSE(c->Contains(Kind::kThread, 5));
  EXPECT_FALSE(c->Contains(Kind::kThread, 1));
  EXPECT_TRUE(c->Contains(Kind::kThread, 6));
  // With every entry ended, a new one takes the place of the first to end.
  for (uint64_t tid : {7, 5, 4, 8, 9}) s.MarkEnded(Kind::kThread, tid);
  s.Put(Kind::kThread, 10, payload);
  EXPECT_EQ(s.stats().evicted_live, 3u);
  EXPECT_FALSE(s.Contains(Kind::kThread, 7));
  EXPECT_TRUE(s.Contains(Kind::kThread, 10));
}

// The heap in use, as glibc's malloc counts it.
size_t HeapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// A full store, and its copy for a snapshot, take no more heap than the
// capacity each: what the memory limits of deploy/ count on (the store and
// its copy). Entries live and ended, reused ids, replaced packets.
TEST(DurableStoreTest, AFullStoreAndItsCloneTakeNoMoreHeapThanTheCapacity) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's allocator keeps its own books, which mallinfo2 does not see";
#endif
  constexpr size_t kCapacity = 4 << 20;
  for (const size_t packet_bytes : {8, 60, 100, 200, 1000}) {
    const size_t before = HeapInUse();
    auto s = std::make_unique<DurableStore>(kCapacity, 1 << 30);
    const std::string packet(packet_bytes, 'x');
    for (uint64_t id = 1; s->stats().evicted_ended + s->stats().evicted_live < 1000; id++) {
      s->Put(Kind::kThread, id, packet);
      if (id % 3 == 0) s->MarkEnded(Kind::kThread, id);
      if (id % 7 == 0) s->Put(Kind::kThread, id - 1, packet + "renamed");
    }
    const size_t heap = HeapInUse() - before;
    EXPECT_LE(heap, kCapacity) << packet_bytes << "-byte packets, " << s->stats().entries
                               << " entries";
    // Counted closely, so that the capacity holds what it can.
    EXPECT_GE(heap, s->stats().bytes * 8 / 10) << packet_bytes << "-byte packets";
    const size_t before_clone = HeapInUse();
    auto clone = s->Clone();
    EXPECT_LE(HeapInUse() - before_clone, kCapacity) << packet_bytes << "-byte packets";
  }
}

TEST(DurableStoreTest, ChangedOnlyVisitsWhatWasWrittenSinceTheLastRead) {
  DurableStore s(1 << 20, 1 << 20);
  s.Put(Kind::kProcess, 1, "a");
  s.Put(Kind::kProcess, 2, "b");
  EXPECT_EQ(All(s, /*changed_only=*/true, /*mark_read=*/true).size(), 2u);
  EXPECT_EQ(All(s, true, true).size(), 0u);
  s.Put(Kind::kProcess, 2, "b2");
  s.Put(Kind::kInterned, 5, "s");
  const std::vector<Seen> changed = All(s, true, true);
  ASSERT_EQ(changed.size(), 2u);
  EXPECT_EQ(changed[0].packet, "b2");
  EXPECT_EQ(All(s).size(), 3u);  // A full visit still sees everything.
}

// Each pass takes what was written since the last one, live or ended, in
// the order it was written; a full visit, a clone's first pass and a pass
// after MarkAllUnread take everything in that order.
TEST(DurableStoreTest, ReadPassesTakeWhatWasWrittenSinceInTheOrderWritten) {
  DurableStore s(1 << 20, 1 << 20);
  using V = std::vector<std::string>;
  s.Put(Kind::kProcess, 1, "a");
  s.Put(Kind::kProcess, 2, "b");
  s.Put(Kind::kThread, 3, "c");
  s.MarkEnded(Kind::kThread, 3);
  EXPECT_EQ(Packets(s, true, true), (V{"a", "b", "c"}));
  s.Put(Kind::kProcess, 1, "a2");
  s.PutEnded(Kind::kThread, 3, "c2");  // Ended, and written again.
  s.Put(Kind::kProcess, 4, "d");
  EXPECT_EQ(Packets(s, true, false), (V{"a2", "c2", "d"}));  // Not marked: again.
  EXPECT_EQ(Packets(s, true, true), (V{"a2", "c2", "d"}));
  EXPECT_TRUE(All(s, true, true).empty());
  EXPECT_EQ(Packets(s), (V{"b", "a2", "c2", "d"}));
  std::unique_ptr<DurableStore> c = s.Clone();
  EXPECT_EQ(Packets(*c, true, true), (V{"b", "a2", "c2", "d"}));
  s.Put(Kind::kProcess, 2, "b2");
  EXPECT_TRUE(All(*c, true, true).empty());
  s.MarkAllUnread();
  EXPECT_EQ(Packets(s, true, true), (V{"a2", "c2", "d", "b2"}));
}

// What the store should hold, by the rules its header states, for a store
// large enough that nothing is evicted: every entry in the order it was
// last written, with whether it ended and whether a pass took it since.
class StoreModel {
 public:
  void Put(Kind kind, uint64_t id, const std::string& packet) {
    if (Entry* live = Live(kind, id)) {
      Rewrite(live, packet);
    } else {
      entries_.push_back({kind, id, packet, false, false});
    }
  }
  void MarkEnded(Kind kind, uint64_t id) {
    if (Entry* live = Live(kind, id)) live->ended = true;
  }
  void PutEnded(Kind kind, uint64_t id, const std::string& packet) {
    if (Live(kind, id) != nullptr) {
      Put(kind, id, packet);
      MarkEnded(kind, id);
      return;
    }
    for (auto e = entries_.rbegin(); e != entries_.rend(); ++e) {
      if (e->kind == kind && e->id == id) return Rewrite(&*e, packet);  // The newest ended one.
    }
    entries_.push_back({kind, id, packet, true, false});
  }
  std::vector<std::string> Visit(bool changed_only, bool mark_read) {
    std::vector<std::string> out;
    for (Entry& e : entries_) {
      if (changed_only && e.read) continue;
      out.push_back(e.packet);
      if (mark_read) e.read = true;
    }
    return out;
  }
  void MarkAllUnread() {
    for (Entry& e : entries_) e.read = false;
  }

 private:
  struct Entry {
    Kind kind;
    uint64_t id;
    std::string packet;
    bool ended;
    bool read;
  };
  Entry* Live(Kind kind, uint64_t id) {
    for (Entry& e : entries_) {
      if (e.kind == kind && e.id == id && !e.ended) return &e;
    }
    return nullptr;
  }
  void Rewrite(Entry* e, const std::string& packet) {
    Entry moved = *e;
    moved.packet = packet;
    moved.read = false;
    entries_.erase(entries_.begin() + (e - entries_.data()));
    entries_.push_back(moved);
  }
  std::vector<Entry> entries_;
};

// Random writes, ends, late descriptions, read passes and clones, each
// store checked against its model after every step: the order of writes
// the store keeps through its entries' links (a clone's its own) is the
// one the passes hand out.
TEST(DurableStoreTest, RandomWritesAndPassesHandOutWhatTheModelSays) {
  std::mt19937 rng(57);
  struct Pair {
    std::unique_ptr<DurableStore> store;
    StoreModel model;
  };
  std::vector<Pair> pairs;
  pairs.reserve(4);  // The stores and their clones: a step's `p` stays valid.
  pairs.push_back({std::make_unique<DurableStore>(64 << 20, 1 << 30), StoreModel()});
  for (int step = 0; step < 4000; step++) {
    Pair& p = pairs[rng() % pairs.size()];
    const Kind kind = rng() % 2 == 0 ? Kind::kProcess : Kind::kThread;
    const uint64_t id = 1 + rng() % 12;
    const std::string packet = "p" + std::to_string(step);
    switch (rng() % 8) {
      case 0:
      case 1:
      case 2:
        p.store->Put(kind, id, packet);
        p.model.Put(kind, id, packet);
        break;
      case 3:
        p.store->MarkEnded(kind, id);
        p.model.MarkEnded(kind, id);
        break;
      case 4:
        p.store->PutEnded(kind, id, packet);
        p.model.PutEnded(kind, id, packet);
        break;
      case 5: {
        const bool changed_only = rng() % 4 != 0, mark_read = rng() % 4 != 0;
        ASSERT_EQ(Packets(*p.store, changed_only, mark_read),
                  p.model.Visit(changed_only, mark_read))
            << "step " << step;
        break;
      }
      case 6:
        p.store->MarkAllUnread();
        p.model.MarkAllUnread();
        break;
      case 7:
        if (pairs.size() < 4) {
          Pair clone{p.store->Clone(), p.model};
          clone.model.MarkAllUnread();
          pairs.push_back(std::move(clone));
        }
        break;
    }
    ASSERT_EQ(Packets(*p.store, false, false), p.model.Visit(false, false)) << "step " << step;
  }
  for (Pair& p : pairs) EXPECT_EQ(Packets(*p.store, true, true), p.model.Visit(true, true));
}

TEST(DurableStoreTest, CloneIsIndependent) {
  const size_t ring = 1 << 20;
  DurableStore s(1 << 20, ring);
  s.Put(Kind::kProcess, 1, "a");
  s.Put(Kind::kProcess, 3, "ends");
  s.MarkEnded(Kind::kProcess, 3);
  std::unique_ptr<DurableStore> c = s.Clone();
  s.Put(Kind::kProcess, 2, "b");
  EXPECT_EQ(All(*c).size(), 2u);
  EXPECT_EQ(All(s).size(), 3u);
  // The clone's live and ended entries are its own: rewriting, ending and
  // compacting them there leaves the original's as they were.
  c->Put(Kind::kProcess, 1, "a, renamed in the clone");
  c->MarkEnded(Kind::kProcess, 1);
  c->Drained(0);
  c->Drained(1);
  c->Drained(2 + 2 * ring);
  EXPECT_TRUE(All(*c).empty());
  EXPECT_EQ(c->stats().compacted, 2u);
  const std::vector<Seen> original = All(s);
  ASSERT_EQ(original.size(), 3u);
  EXPECT_EQ(original[0].packet, "a");
  EXPECT_TRUE(s.Contains(Kind::kProcess, 3));
  s.Put(Kind::kProcess, 1, "a, renamed");  // Still live here: replaced, not added.
  EXPECT_EQ(s.stats().entries, 3u);
}

// Beside a ring: each read pass hands out the descriptors written since the
// previous pass before any ring packet, and a clone's first pass all of them.
TEST(DurableStoreTest, ARingsReaderGetsTheDescriptorsFirstAndAClonesReaderAllOfThem) {
  auto ring = TraceBuffer::Create(64 * 1024);
  ring->SetDurableStore(std::make_unique<DurableStore>(1 << 20, ring->size()));
  ring->durable()->Put(Kind::kProcess, 1, "proc-1");
  ring->durable()->Put(Kind::kThread, 1, "thread-1");
  const ChunkBuilder chunk = ChunkBuilder(0, 1).AddFragment("event-a").AddFragment("event-b");
  ring->CopyChunkUntrusted(7, ClientIdentity{0, 1}, chunk.writer_id(), chunk.chunk_id(),
                           chunk.num_fragments(), chunk.flags(), true, chunk.payload_data(),
                           chunk.payload().size());
  auto read = [](TraceBuffer* b) {
    std::vector<std::pair<ProducerID, std::string>> out;
    b->BeginRead();
    TracePacket packet;
    PacketSequenceProperties props;
    uint32_t loss = 0;
    while (b->ReadNextTracePacket(&packet, &props, &loss)) {
      out.emplace_back(props.producer_id_trusted, packet.ToString());
    }
    return out;
  };
  std::unique_ptr<TraceBuffer> clone = ring->CloneReadOnly();
  using Read = std::vector<std::pair<ProducerID, std::string>>;
  EXPECT_EQ(read(ring.get()), (Read{{TraceBuffer::kDurableProducerId, "proc-1"},
                                    {TraceBuffer::kDurableProducerId, "thread-1"},
                                    {7, "event-a"},
                                    {7, "event-b"}}));
  ring->durable()->Put(Kind::kThread, 1, "thread-1-renamed");
  EXPECT_EQ(read(ring.get()), (Read{{TraceBuffer::kDurableProducerId, "thread-1-renamed"}}));
  // The clone was taken before any read: everything, descriptors first.
  const Read from_clone = read(clone.get());
  ASSERT_EQ(from_clone.size(), 4u);
  EXPECT_EQ(from_clone[0].second, "proc-1");
  EXPECT_EQ(from_clone[2].second, "event-a");
  // A clone taken after the reads still hands out every descriptor.
  EXPECT_EQ(read(ring->CloneReadOnly().get()).size(), 2u);
}

}  // namespace
// Interned data (a stack writer's frames) is read on the sequence of the
// samples that refer to it, which its id names; descriptors on the store's
// own. Both are marked durable, ring packets not.
TEST(DurableStoreTest, InternedEntriesAreReadOnTheSequenceTheirIdNames) {
  auto ring = TraceBuffer::Create(64 * 1024);
  ring->SetDurableStore(std::make_unique<DurableStore>(1 << 20, ring->size()));
  ring->durable()->Put(Kind::kProcess, 1, "proc-1");
  ring->durable()->Put(Kind::kInterned, DurableStore::InternedId(7, 0x7fff, 3), "frames");
  const ChunkBuilder chunk = ChunkBuilder(0, 0x7fff).AddFragment("sample");
  ring->CopyChunkUntrusted(7, ClientIdentity{0, 1}, chunk.writer_id(), chunk.chunk_id(),
                           chunk.num_fragments(), chunk.flags(), true, chunk.payload_data(),
                           chunk.payload().size());
  struct Read {
    ProducerID producer;
    WriterID writer;
    bool durable;
    std::string packet;
    bool operator==(const Read&) const = default;
  };
  std::vector<Read> got;
  ring->BeginRead();
  TracePacket packet;
  PacketSequenceProperties props;
  uint32_t loss = 0;
  while (ring->ReadNextTracePacket(&packet, &props, &loss)) {
    got.push_back({props.producer_id_trusted, props.writer_id, props.durable, packet.ToString()});
  }
  EXPECT_EQ(got, (std::vector<Read>{{TraceBuffer::kDurableProducerId, 0, true, "proc-1"},
                                    {7, 0x7fff, true, "frames"},
                                    {7, 0x7fff, false, "sample"}}));
  EXPECT_EQ(DurableStore::SequenceOf(Kind::kThread, DurableStore::InternedId(7, 1, 2)),
            (std::pair<uint16_t, uint16_t>{0, 0}));
}

}  // namespace ringside::buffer
