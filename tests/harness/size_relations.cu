// kl::related_size on the host (no GPU): for each case, 2000 draws of the last size() call, printed
// as "case <name> <draw> ..." so the test can check every relation the declared options show.
#include <cstdio>
#include <kernelloop_harness.cuh>

static void draws(const char* name, const long long values[][8], const long long chosen[], const bool integral[],
                  int call, int options, int only = 63, int keep = 3) {
  long long lo = values[call][0], hi = lo, g = 0;
  for (int k = 0; k < options; ++k) {
    lo = std::min(lo, values[call][k]);
    hi = std::max(hi, values[call][k]);
    long long a = g, b = values[call][k];
    while (b) { long long t = a % b; a = b; b = t; }
    g = a;
  }
  printf("case %s", name);
  for (uint64_t r = 0; r < 2000; ++r)
    printf(" %lld", kl::related_size(values, chosen, integral, call, options, lo, hi, g, kl::mix64(r), only, keep));
  printf("\n");
}

int main() {
  const bool integral[4] = {true, true, true, true};
  // group norm: N (16, 3), C (128, 60), HxW; group (32, 6) divides C and is a multiple of N.
  const long long norm[4][8] = {{16, 3}, {128, 60}, {4096, 1155}, {32, 6}};
  const long long norm_chosen[3] = {5, 36, 2000};
  draws("group_norm", norm, norm_chosen, integral, 3, 2);
  draws("group_norm_divisors", norm, norm_chosen, integral, 3, 2, 63, 2);
  draws("group_norm_multiples", norm, norm_chosen, integral, 3, 2, 63, 1);
  // one relation at a time: relations 1 (C of N), 2 (HxW? no: 4096/16, 1155/3 are whole: HxW of N),
  // then for the group count: 3 (a multiple of N), 4 (a divisor of C); HxW and C show none
  draws("group_norm_only_3", norm, norm_chosen, integral, 3, 2, 3);
  draws("group_norm_only_4", norm, norm_chosen, integral, 3, 2, 4);
  draws("group_norm_only_1", norm, norm_chosen, integral, 3, 2, 1);
  // all but one: all but relation 3 keeps 4 (the group count divides C); all but 4 keeps 3
  draws("group_norm_all_but_3", norm, norm_chosen, integral, 3, 2, 31 + 3);
  draws("group_norm_all_but_4", norm, norm_chosen, integral, 3, 2, 31 + 4);
  // a square matrix: both sides equal in every option.
  const long long square[2][8] = {{1024, 333}, {1024, 333}};
  const long long square_chosen[1] = {777};
  draws("square", square, square_chosen, integral, 1, 2);
  // no relation: an independent span.
  const long long free_sizes[2][8] = {{1000, 777}, {64, 33}};
  const long long free_chosen[1] = {999};
  draws("free", free_sizes, free_chosen, integral, 1, 2);
  // a relation no size in the span keeps (a multiple of 999 up to 1.25 x 96): 0, the caller's span then.
  const long long none[2][8] = {{32, 16}, {96, 48}};
  const long long none_chosen[1] = {999};
  draws("none", none, none_chosen, integral, 1, 2);
  // an earlier size of a floating type is no relation.
  const bool floating[2] = {false, true};
  const long long scale[2][8] = {{2, 3}, {64, 96}};
  const long long scale_chosen[1] = {5};
  draws("floating", scale, scale_chosen, floating, 1, 2);
  // DGEMM, column-major (kept-aside set 20): m, n, k, then lda, at least m in every option (1024 and
  // 337 against 1024 and 333), at least n and k too (by chance). Kept orderings bound lda's draw below
  // by the largest of them; a bound past the span leaves the span alone (0 from related_size).
  const long long gemm[4][8] = {{1024, 333}, {1024, 257}, {1024, 129}, {1024, 337}};
  const long long gemm_chosen[3] = {700, 300, 900};
  long long at_least = 0, at_most = std::numeric_limits<long long>::max();
  kl::size_order_bounds(gemm, gemm_chosen, integral, 3, 2, &at_least, &at_most);
  printf("case gemm_lda_bounds %lld %lld\n", at_least, at_most == std::numeric_limits<long long>::max() ? -1 : at_most);
  printf("case gemm_lda");
  for (uint64_t r = 0; r < 2000; ++r)
    printf(" %lld", kl::related_size(gemm, gemm_chosen, integral, 3, 2, 337, 1024, 1, kl::mix64(r), 0, 3, at_least, at_most));
  printf("\n");
  // k (call 2) is at most m and n in every option: bounded above by the smaller chosen one.
  at_least = 0, at_most = std::numeric_limits<long long>::max();
  kl::size_order_bounds(gemm, gemm_chosen, integral, 2, 2, &at_least, &at_most);
  printf("case gemm_k_bounds %lld %lld\n", at_least, at_most);
  // square sizes (equal in every option) bound nothing: their equality is a relation of its own.
  at_least = 0, at_most = std::numeric_limits<long long>::max();
  kl::size_order_bounds(square, square_chosen, integral, 1, 2, &at_least, &at_most);
  printf("case square_bounds %lld %lld\n", at_least, at_most == std::numeric_limits<long long>::max() ? -1 : at_most);
  // bounds no size in the span keeps: 0, and the caller draws the span alone.
  const long long tight[2][8] = {{64, 32}, {96, 48}};
  const long long tight_chosen[1] = {5000};
  at_least = 0, at_most = std::numeric_limits<long long>::max();
  kl::size_order_bounds(tight, tight_chosen, integral, 1, 2, &at_least, &at_most);
  printf("case tight %lld\n", kl::related_size(tight, tight_chosen, integral, 1, 2, 48, 96, 48, 7, 0, 3, at_least, at_most));
  // round sizes (bit 55 of a draw): a matmul declared at 1024 and 1001, span [500, 1280] in units of 1; a row
  // length declared at 4096 and 2064 (a common factor of 16), span [64, 320] in units of 16
  const long long mm[2] = {1024, 1001};
  printf("case round_matmul");
  for (uint64_t r = 0; r < 2000; ++r) printf(" %lld", kl::round_multiple(500, 1280, kl::mix64(r), mm, 2, 1));
  printf("\n");
  const long long rows[2] = {4096, 2064};
  printf("case round_rows");
  for (uint64_t r = 0; r < 2000; ++r) printf(" %lld", 16 * kl::round_multiple(64, 320, kl::mix64(r), rows, 2, 16));
  printf("\n");
  const long long one[1] = {4};
  printf("case round_none %lld\n", kl::round_multiple(3, 5, 7, one, 1, 1));
  // a round draw keeps the equalities the default shows: a transpose of 8192^2 (alternative 3001 x 4999)
  const long long transpose_sizes[2][8] = {{8192, 3001}, {8192, 4999}};
  const long long transpose_chosen[1] = {4096};
  printf("case square_default %lld %lld %lld\n",
         kl::equal_default_size(transpose_sizes, transpose_chosen, integral, 1, 8192, 2499, 10240, 1),
         kl::equal_default_size(transpose_sizes, transpose_chosen, integral, 1, 4096, 2499, 10240, 1),
         kl::equal_default_size(transpose_sizes, transpose_chosen, integral, 1, 8192, 5000, 10240, 1));
  // a round draw keeping some sizes at their defaults: rows round, cols kept at its default 2048
  const long long softmax_sizes[2][8] = {{16384, 1001}, {2048, 333}};
  const long long softmax_chosen[1] = {4096};
  const long long softmax_cols[2] = {2048, 333};
  printf("case keep_default %lld %lld\n",
         kl::round_size(softmax_sizes, softmax_chosen, integral, 1, softmax_cols, 2, 166, 2560, 1, 99, 2),
         kl::round_size(softmax_sizes, softmax_chosen, integral, 1, softmax_cols, 2, 166, 2560, 1, 99, 0));
  // ratios between defaults carried over (rows 16384 = 8 x cols 2048: rows drawn 4096 gives cols 512); a size
  // kept at its default carries nothing over (transpose rows kept at 8192: cols moves, not stuck at 8192)
  printf("case ratio_default %lld\n",
         kl::round_size(softmax_sizes, softmax_chosen, integral, 1, softmax_cols, 2, 166, 2560, 1, 99, 0));
  const long long square_cols[2] = {8192, 4999};
  const long long rows_kept[1] = {8192};
  printf("case kept_not_copied %lld\n",
         kl::round_size(transpose_sizes, rows_kept, integral, 1, square_cols, 2, 2499, 10240, 1, 99, 1));
  // one size moving alone (the gate's single_size_keeps): batch, M and N (M == N at their defaults); moving N alone
  // keeps M at 1024 and does not copy it into N; moving batch alone keeps M and N at 1024
  const long long bmn_sizes[3][8] = {{8, 3}, {1024, 333}, {1024, 333}};
  const long long bmn_chosen[2] = {8, 1024};
  const long long bmn_n[2] = {1024, 333};
  const long long bmn_m[2] = {1024, 333};
  const long long batch_moved[1] = {4};
  printf("case single_mover %lld %lld\n",
         kl::round_size(bmn_sizes, bmn_chosen, integral, 2, bmn_n, 2, 166, 1280, 1, 99, 0b011),
         kl::round_size(bmn_sizes, batch_moved, integral, 1, bmn_m, 2, 166, 1280, 1, 99, 0b110));
  return 0;
}
