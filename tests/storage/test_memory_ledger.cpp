// memory_ledger, tracking_allocator and ledger_charge (minifloat/storage/memory_ledger.hpp):
// exact byte counts, peaks, the breakdown at the total peak, and category-keeping assignment.
#include <catch2/catch.hpp>

#include <vector>

#include <minifloat/storage/memory_ledger.hpp>

namespace ms = minifloat::storage;
using ms::memory_category;

namespace {
using tracked = std::vector<float, ms::tracking_allocator<float>>;
std::size_t at_peak(const ms::memory_ledger& l, memory_category c) { return l.breakdown_at_peak()[static_cast<std::size_t>(c)]; }
}  // namespace

TEST_CASE("a tracked vector charges its exact allocation and releases it") {
  ms::memory_ledger ledger;
  {
    tracked w(100, 0.0f, {&ledger, memory_category::weights});
    CHECK(ledger.current(memory_category::weights) == 400);
    tracked g({&ledger, memory_category::gradients});
    g.reserve(10);
    CHECK(ledger.current_total() == 440);
    g.reserve(20);  // the new block is allocated before the old one is freed: a real transient
    CHECK(ledger.current(memory_category::gradients) == 80);
    CHECK(ledger.peak(memory_category::gradients) == 120);
    CHECK(ledger.peak_total() == 520);
    CHECK(at_peak(ledger, memory_category::weights) == 400);
    CHECK(at_peak(ledger, memory_category::gradients) == 120);
  }
  CHECK(ledger.current_total() == 0);
  CHECK(ledger.peak_total() == 520);
  ledger.reset_peaks();
  CHECK(ledger.peak_total() == 0);
}

TEST_CASE("assignment keeps the target's category; moves carry it; track() re-homes") {
  ms::memory_ledger ledger;
  tracked a(4, 1.0f, {&ledger, memory_category::activations});
  tracked b(4, 2.0f, {&ledger, memory_category::journal});
  a = b;  // copy: a stays an activation
  CHECK(ledger.current(memory_category::activations) == 16);
  CHECK(ledger.current(memory_category::journal) == 16);
  std::vector<float, ms::tracking_allocator<float>> plain(8, 3.0f);
  CHECK(ledger.current_total() == 32);
  ms::track(plain, {&ledger, memory_category::weights});
  CHECK(ledger.current(memory_category::weights) == 32);
  CHECK(plain[7] == 3.0f);
}

TEST_CASE("ledger_charge follows its owner's size and releases on destruction or move") {
  ms::memory_ledger ledger;
  {
    ms::ledger_charge c(&ledger, memory_category::extra_bits, 12);
    CHECK(ledger.current(memory_category::extra_bits) == 12);
    c.resize(40);
    c.resize(8);
    CHECK(ledger.current(memory_category::extra_bits) == 8);
    CHECK(ledger.peak(memory_category::extra_bits) == 40);
    ms::ledger_charge moved = std::move(c);
    CHECK(ledger.current(memory_category::extra_bits) == 8);
    ms::ledger_charge none;  // no ledger: counts nothing
    none.resize(100);
    CHECK(ledger.current_total() == 8);
  }
  CHECK(ledger.current_total() == 0);
}
