// The session-8 host pieces of the cpu backend: 2 MiB-aligned bank mappings and the smaps
// read-back of their huge pages, the GPU-driving thread's CPU set off the pool's cores and
// its pin given back, and gpu_act_aux in parts (the spread GLU phase) = in one piece.
#include <gtest/gtest.h>

#include <sched.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "moe_cpu/cpu_pool.h"
#include "moe_cpu/cpu_topology.h"
#include "moe_cpu/gemv_bw.h"
#include "moe_cpu/gpu_dot.h"
#include "moe_cpu/huge_pages.h"

namespace ft::moe_cpu {
namespace {

cpu_set_t current_mask() {
  cpu_set_t s;
  CPU_ZERO(&s);
  sched_getaffinity(0, sizeof(s), &s);
  return s;
}

TEST(HugePages, MapIsAlignedWritableAndCounted) {
  size_t mapped = 0;
  const size_t n = 5 * kHugePage + 12345;
  void* p = map_huge(n, &mapped);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePage, 0u);
  EXPECT_EQ(mapped, 6 * kHugePage);
  touch_pages(p, n, 3);
  auto* b = static_cast<uint8_t*>(p);
  EXPECT_EQ(b[0], 0);
  EXPECT_EQ(b[n - 1], 0);
  std::memset(b, 0x5a, n);
  EXPECT_EQ(b[n - 1], 0x5a);
  // Whatever THP did, the read-back stays inside the mapping (0 where THP is off).
  EXPECT_LE(anon_huge_bytes(p, mapped), mapped);
  EXPECT_NE(thp_settings().find("THP enabled"), std::string::npos);
  unmap_huge(p, mapped);
}

TEST(HugePages, BenchBankPagesKeepTheirBytes) {
  for (BankPages pg : {BankPages::kDefault, BankPages::kHuge, BankPages::kSmall}) {
    HostBytes hb;
    hb.alloc(3 << 20, pg);
    ASSERT_NE(hb.data(), nullptr);
    EXPECT_GE(hb.size(), size_t{3} << 20);
    hb.data()[(3 << 20) - 1] = 7;
    EXPECT_LE(hb.huge_bytes(), hb.size());
    if (pg == BankPages::kSmall) {
      EXPECT_EQ(hb.huge_bytes(), 0u);
    }
  }
}

// The driver's CPUs share no physical core with the pool's threads; with the pool on every
// core but the reserved one there is one core left (or none on a one-core machine).
TEST(DriverPin, CpusOffThePoolsCores) {
  const std::vector<int> cores = physical_core_cpus();
  CpuPoolOptions o;
  o.pin = true;
  CpuPool pool(o);
  const std::vector<int> off = cpus_off_cores(pool.cpus());
  for (int c : off)
    for (int t : pool.cpus()) EXPECT_NE(c, t);
  if (cores.size() >= 2 && pool.pinned()) {
    ASSERT_FALSE(off.empty());
    EXPECT_EQ(off.front(), cores.front());  // the reserved core
  }
  EXPECT_TRUE(cpus_off_cores({}).size() >= cores.size());
}

TEST(DriverPin, PinIsGivenBackOnTheSameThread) {
  const cpu_set_t before = current_mask();
  const std::vector<int> cores = physical_core_cpus();
  {
    ThreadPin pin;
    ASSERT_TRUE(pin.pin({cores.back()}));
    const cpu_set_t now = current_mask();
    EXPECT_EQ(CPU_COUNT(&now), 1);
    EXPECT_TRUE(CPU_ISSET(cores.back(), &now));
    EXPECT_FALSE(pin.pin({}));  // empty set: refused, and the earlier pin given back
    EXPECT_FALSE(pin.active());
    const cpu_set_t back = current_mask();
    EXPECT_TRUE(CPU_EQUAL(&back, &before));
    ASSERT_TRUE(pin.pin({cores.front()}));
  }
  const cpu_set_t after = current_mask();
  EXPECT_TRUE(CPU_EQUAL(&after, &before));
}

// The spread GLU phase fills a route's aux in pieces of 64 values from several threads; the
// pieces must give gpu_act_aux's entries exactly.
TEST(GpuActAux, PartsEqualTheWhole) {
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::Q8_0, GgmlType::MXFP4}) {
    const int64_t k = 768;
    std::mt19937 rng(5);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> x(k);
    for (float& v : x) v = d(rng);
    std::vector<int8_t> qs(k);
    std::vector<float> sc(k / 32);
    gpu_quantize_act_q8(x.data(), k, qs.data(), sc.data());
    GpuActAux whole, parts;
    gpu_act_aux(t, GpuActQ8{qs.data(), sc.data()}, k, whole);
    gpu_act_aux_size(t, k, parts);
    std::vector<std::thread> th;
    for (int64_t j = k - 64; j >= 0; j -= 64)
      th.emplace_back([&, j] { gpu_act_aux_part(t, GpuActQ8{qs.data(), sc.data()}, j, j + 64, parts); });
    for (std::thread& h : th) h.join();
    EXPECT_EQ(whole.sum, parts.sum) << type_name(t);
    EXPECT_EQ(whole.nv_ab, parts.nv_ab) << type_name(t);
    EXPECT_EQ(whole.dxh, parts.dxh) << type_name(t);
    EXPECT_FALSE(whole.sum.empty());
  }
}

}  // namespace
}  // namespace ft::moe_cpu
