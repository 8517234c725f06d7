// The lookup tables of a snapshot, built on the worker thread so the main
// thread makes nothing per record: pid -> record, ppid -> children and
// pgid -> group members. Portable: it reads only PackedSnapshot::ints.
//
// out.index holds three tables, pid then ppid then pgid, each laid out as
//   [bits, m, keys[cap], start[cap], count[cap], order[m]]   cap = 1 << bits
// keys: an open-addressing hash set of the distinct key values (-1 = empty
// slot), probed linearly from Slot(key); start/count: that key's run in
// order; order: the m indexed record numbers sorted by key, in walk order
// within one key. A record with a negative ppid or pgid (unknown) is not
// indexed by it: -1 is nobody's parent or group. The TS reader is
// src/facts/native-snapshot.ts; both sides must hash alike.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "facts.h"

namespace proclease {
namespace {

// Fibonacci hashing: the top `bits` bits of key * 2^32/phi. JS computes the
// same with Math.imul(key, 0x9e3779b1) >>> (32 - bits).
uint32_t Slot(int32_t key, uint32_t bits) {
  return (static_cast<uint32_t>(key) * 0x9E3779B1u) >> (32 - bits);
}

// At most half full, so a probe always ends at an empty slot.
uint32_t BitsFor(size_t distinct) {
  uint32_t bits = 4;
  while ((size_t{1} << bits) < distinct * 2) bits++;
  return bits;
}

void AppendTable(const std::vector<int32_t>& ints, size_t count, int field, std::vector<int32_t>& out) {
  std::vector<std::pair<int32_t, int32_t>> byKey;  // (key, record number)
  byKey.reserve(count);
  for (size_t i = 0; i < count; i++) {
    const int32_t key = ints[i * kIntFields + static_cast<size_t>(field)];
    if (key >= 0) byKey.emplace_back(key, static_cast<int32_t>(i));
  }
  std::sort(byKey.begin(), byKey.end());  // by key, then record number: walk order
  size_t distinct = 0;
  for (size_t i = 0; i < byKey.size(); i++) distinct += i == 0 || byKey[i].first != byKey[i - 1].first;
  const uint32_t bits = BitsFor(distinct);
  const size_t cap = size_t{1} << bits;
  const size_t m = byKey.size();
  const size_t base = out.size();
  out.resize(base + 2 + 3 * cap + m, 0);
  out[base] = static_cast<int32_t>(bits);
  out[base + 1] = static_cast<int32_t>(m);
  int32_t* keys = out.data() + base + 2;
  int32_t* start = keys + cap;
  int32_t* runs = start + cap;
  int32_t* order = runs + cap;
  std::fill(keys, keys + cap, -1);
  for (size_t i = 0; i < m;) {
    size_t j = i;
    while (j < m && byKey[j].first == byKey[i].first) {
      order[j] = byKey[j].second;
      j++;
    }
    uint32_t s = Slot(byKey[i].first, bits);
    while (keys[s] != -1) s = (s + 1) & static_cast<uint32_t>(cap - 1);
    keys[s] = byKey[i].first;
    start[s] = static_cast<int32_t>(i);
    runs[s] = static_cast<int32_t>(j - i);
    i = j;
  }
}

}  // namespace

void BuildSnapshotIndex(PackedSnapshot& out) {
  out.index.clear();
  AppendTable(out.ints, out.count, 0, out.index);  // pid
  AppendTable(out.ints, out.count, 1, out.index);  // ppid
  AppendTable(out.ints, out.count, 2, out.index);  // pgid
}

}  // namespace proclease
