// The fingerprint of each built-in task, pinned. A run folder records its
// task's fingerprint, and resume, replay and warm starts refuse a task whose
// specification changed (its kernels' text included, cuda_helpers/ inlined):
// a change here means the runs made before it can no longer go on. Change a
// pin only on purpose, and say so in the release notes.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "engine/warm_start.hpp"
#include "ksearch/tasks.hpp"

using namespace ks;

TEST_CASE("built-in tasks: fingerprints are pinned, so earlier runs resume") {
  const std::map<std::string, std::string> pinned = {
      {"flashinfer/gqa_paged_decode_h32_kv4_d128_ps1", "8de79028dab3ec47"},
      {"flashinfer/mla_paged_decode_h16_ckv512_kpe64_ps1", "445409c9a868fd4d"},
      {"flashinfer/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1", "2c73576e4cea8dd0"},
      {"flashinfer/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", "275333bf98a1a438"},
      {"gpumode/trimul", "3453fff1792c4a07"},
      {"gpumode/trimul-upstream", "3057707fcd7c184b"},
      {"kernelbench/level1/12_Matmul_with_diagonal_matrices_", "e3340b5fea60a9f4"},
      {"kernelbench/level1/19_ReLU", "d57d54a9ef4ac286"},
      {"kernelbench/level1/1_Square_matrix_multiplication_", "d1ff56775b4c0f7c"},
      {"kernelbench/level1/20_LeakyReLU", "2c1f650369c3cb95"},
      {"kernelbench/level1/21_Sigmoid", "21d33bde76bf9da5"},
      {"kernelbench/level1/22_Tanh", "6a62a9192ff31e3d"},
      {"kernelbench/level1/23_Softmax", "8f603c049cb496dd"},
      {"kernelbench/level1/24_LogSoftmax", "44d6ada6413f35b1"},
      {"kernelbench/level1/25_Swish", "c76af3a95da11e27"},
      {"kernelbench/level1/26_GELU_", "609d8763da332798"},
      {"kernelbench/level1/27_SELU_", "571a850733e04566"},
      {"kernelbench/level1/28_HardSigmoid", "851ffcd980b4bb4f"},
      {"kernelbench/level1/29_Softplus", "861d1cb377474a40"},
      {"kernelbench/level1/2_Standard_matrix_multiplication_", "d519faf2140a4ffd"},
      {"kernelbench/level1/30_Softsign", "f8a242d768b7a5bf"},
      {"kernelbench/level1/31_ELU", "0d1668f4ccb0ebe6"},
      {"kernelbench/level1/32_HardTanh", "4d8e3d425fcc6823"},
      {"kernelbench/level1/36_RMSNorm_", "72f4eb6e856550fd"},
      {"kernelbench/level1/3_Batched_matrix_multiplication", "04a3854b38ca733e"},
      {"kernelbench/level1/40_LayerNorm", "0e5221b926bd6165"},
      {"kernelbench/level1/47_Sum_reduction_over_a_dimension", "8c7029f4cfa081ed"},
      {"kernelbench/level1/48_Mean_reduction_over_a_dimension", "e20726a96dd240e1"},
      {"kernelbench/level1/49_Max_reduction_over_a_dimension", "d9d597045cfa583d"},
      {"kernelbench/level1/4_Matrix_vector_multiplication_", "a6fdf030c77337e6"},
      {"kernelbench/level1/5_Matrix_scalar_multiplication", "2a0edc52805db2f6"},
      {"kernelbench/level1/63_conv_standard_2D__square_input__square_kernel", "b0e11670dda95189"},
      {"kernelbench/level1/7_Matmul_with_small_K_dimension_", "0c3b8d37bbd159a6"},
      {"kernelbench/level1/89_cumsum", "8903ce95ac0988b2"},
      {"kernelbench/level1/8_Matmul_with_irregular_shapes_", "bb33f5ad3567e710"},
      {"kernelbench/level1/9_Tall_skinny_matrix_multiplication_", "3e243b3020e2a8ad"},
  };
  std::string table;
  int builtins = 0;
  for (const TaskInfo& info : list_tasks()) {
    // Other tests of this program register built-ins of their own ("test/...").
    if (info.source != "built-in" || info.name.rfind("test/", 0) == 0) continue;
    ++builtins;
    const std::string fp = engine::task_fingerprint(load_task(info.name)->spec());
    table += "      {\"" + info.name + "\", \"" + fp + "\"},\n";
    auto it = pinned.find(info.name);
    INFO(info.name);
    CHECK(it != pinned.end());
    if (it != pinned.end()) CHECK(it->second == fp);
  }
  CHECK(builtins == static_cast<int>(pinned.size()));
  if (builtins != static_cast<int>(pinned.size())) MESSAGE("the fingerprints now:\n" << table);
}
