// A host- and device-callable twin of libstdc++'s std::sort (introsort: median-of-3
// unguarded partitions down to 16 elements, heapsort past 2*lg(n) levels, one final
// insertion sort), step for step, so that elements that compare equal end up in exactly
// the order std::sort leaves them. engine::moe_route picks the top-k experts with std::sort
// (as ggml-cpu's argsort does), and with tied probabilities the chosen experts and their
// rank order depend on that algorithm; moe_route.cu falls back to this twin when a tie
// reaches the top k. tests/cuda/ops_stl_sort_test.cpp checks it against std::sort itself.
//
// Recursion is replaced by an explicit stack: the partitions are disjoint, so the order in
// which they are finished does not change the result.
#pragma once

#include <cstdint>

#include "cuda/ops_math.cuh"

namespace ft::cuda::stl_sort {

// std::__adjust_heap followed by std::__push_heap.
template <class T, class Comp>
FT_OPS_HD void heap_adjust(T* first, int64_t hole, int64_t len, T value, Comp& comp) {
  const int64_t top = hole;
  int64_t child = hole;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (comp(first[child], first[child - 1])) child--;
    first[hole] = first[child];
    hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    first[hole] = first[child - 1];
    hole = child - 1;
  }
  // push_heap
  int64_t parent = (hole - 1) / 2;
  while (hole > top && comp(first[parent], value)) {
    first[hole] = first[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  first[hole] = value;
}

// std::__partial_sort(first, last, last): make_heap, then sort_heap.
template <class T, class Comp>
FT_OPS_HD void heap_sort(T* first, int64_t len, Comp& comp) {
  if (len >= 2) {
    for (int64_t parent = (len - 2) / 2;; --parent) {
      heap_adjust(first, parent, len, first[parent], comp);
      if (parent == 0) break;
    }
  }
  for (int64_t last = len; last > 1;) {
    --last;
    const T value = first[last];
    first[last] = first[0];
    heap_adjust(first, 0, last, value, comp);
  }
}

template <class T>
FT_OPS_HD void swap_at(T* v, int64_t i, int64_t j) {
  const T t = v[i];
  v[i] = v[j];
  v[j] = t;
}

template <class T, class Comp>
FT_OPS_HD void move_median_to_first(T* v, int64_t result, int64_t a, int64_t b, int64_t c, Comp& comp) {
  if (comp(v[a], v[b])) {
    if (comp(v[b], v[c])) swap_at(v, result, b);
    else if (comp(v[a], v[c])) swap_at(v, result, c);
    else swap_at(v, result, a);
  } else if (comp(v[a], v[c])) {
    swap_at(v, result, a);
  } else if (comp(v[b], v[c])) {
    swap_at(v, result, c);
  } else {
    swap_at(v, result, b);
  }
}

// std::__unguarded_partition_pivot on v[first, last): returns the cut.
template <class T, class Comp>
FT_OPS_HD int64_t partition_pivot(T* v, int64_t first, int64_t last, Comp& comp) {
  const int64_t mid = first + (last - first) / 2;
  move_median_to_first(v, first, first + 1, mid, last - 1, comp);
  const int64_t pivot = first;
  int64_t lo = first + 1, hi = last;
  while (true) {
    while (comp(v[lo], v[pivot])) ++lo;
    --hi;
    while (comp(v[pivot], v[hi])) --hi;
    if (!(lo < hi)) return lo;
    swap_at(v, lo, hi);
    ++lo;
  }
}

// std::__unguarded_linear_insert at position i.
template <class T, class Comp>
FT_OPS_HD void linear_insert(T* v, int64_t i, Comp& comp) {
  const T val = v[i];
  int64_t next = i - 1;
  while (comp(val, v[next])) {
    v[i] = v[next];
    i = next;
    --next;
  }
  v[i] = val;
}

// std::__insertion_sort on v[first, last).
template <class T, class Comp>
FT_OPS_HD void insertion_sort(T* v, int64_t first, int64_t last, Comp& comp) {
  if (first == last) return;
  for (int64_t i = first + 1; i != last; ++i) {
    if (comp(v[i], v[first])) {
      const T val = v[i];
      for (int64_t j = i; j > first; --j) v[j] = v[j - 1];
      v[first] = val;
    } else {
      linear_insert(v, i, comp);
    }
  }
}

FT_OPS_HD constexpr int floor_log2(int64_t n) {
  int k = 0;
  while (n > 1) n >>= 1, ++k;
  return k;
}

// One pending partition of the explicit stack. The entries on the stack have strictly
// decreasing depths (each pushed one is a level below the one it came from), so a sort with
// depth limit D never holds more than D + 1 of them: stack_need(n) entries are enough.
template <class I>
struct Range {
  I first, last;
  int depth;
};

FT_OPS_HD constexpr int stack_need(int64_t n) { return 2 * floor_log2(n < 1 ? 1 : n) + 1; }

// sort() below on the caller's stack of at least stack_need(n) entries. The GPU router keeps it in
// shared memory: as a local array it was a 3,120-byte stack frame, and the driver reserves a
// kernel's frame for every thread the GPU can hold (~0.5 GiB on an H200, session 11).
template <class T, class Comp, class I>
FT_OPS_HD void sort_with(T* v, int64_t n, Comp comp, Range<I>* stack, int depth_limit = -1) {
  constexpr int64_t kThreshold = 16;
  if (n <= 0) return;
  if (depth_limit < 0 || depth_limit > 2 * floor_log2(n)) depth_limit = 2 * floor_log2(n);  // <= 126
  int top = 0;
  stack[top++] = {static_cast<I>(0), static_cast<I>(n), depth_limit};
  while (top > 0) {
    const Range<I> e = stack[--top];
    int64_t first = e.first, last = e.last;
    int depth = e.depth;
    while (last - first > kThreshold) {
      if (depth == 0) {
        heap_sort(v + first, last - first, comp);
        break;
      }
      --depth;
      const int64_t cut = partition_pivot(v, first, last, comp);
      stack[top++] = {static_cast<I>(cut), static_cast<I>(last), depth};
      last = cut;
    }
  }
  if (n > kThreshold) {
    insertion_sort(v, 0, kThreshold, comp);
    for (int64_t i = kThreshold; i < n; ++i) linear_insert(v, i, comp);
  } else {
    insertion_sort(v, 0, n, comp);
  }
}

// Sorts v[0..n) with comp(a, b) ("a goes before b"), like std::sort(v, v + n, comp).
// depth_limit < 0: std::sort's 2*floor(log2(n)); tests pass 0 to drive the heapsort path.
// Its stack is a local array (host use; 2 * 63 + 1 entries cover any int64 n).
template <class T, class Comp>
FT_OPS_HD void sort(T* v, int64_t n, Comp comp, int depth_limit = -1) {
  Range<int64_t> stack[2 * 64 + 2];
  sort_with(v, n, comp, stack, depth_limit);
}

}  // namespace ft::cuda::stl_sort
