// Runs ggml's own reference quantizers (quantize_row_nvfp4_ref, quantize_row_mxfp4_ref) and
// NVFP4 dequantizer on one float32 matrix and writes their raw outputs. Linked against ggml's
// ggml-quants.c (ggml-org/ggml, MIT, taken from the peers folder at build time; not part of this
// project). Usage: ggml_flavor IN.f32 ROWS COLS OUT_PREFIX  ->  OUT_PREFIX.nvfp4 (36-byte blocks,
// row after row), OUT_PREFIX.nvfp4_deq (float32), OUT_PREFIX.mxfp4 (17-byte blocks).
#define GGML_COMMON_DECL_C
#include "ggml-common.h"
#include "ggml-quants.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

// The few symbols ggml-quants.c links against that live in ggml.c; none is reached here.
void ggml_abort(const char* file, int line, const char* fmt, ...) {
  fprintf(stderr, "ggml abort %s:%d\n", file, line);
  (void)fmt;
  abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void)type; (void)ne; abort(); }
const char* ggml_type_name(enum ggml_type type) { (void)type; return "?"; }
size_t ggml_type_size(enum ggml_type type) { (void)type; abort(); }

static void write_all(const char* prefix, const char* suffix, const void* data, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s.%s", prefix, suffix);
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(data, 1, bytes, f) != bytes) { perror(path); exit(1); }
  fclose(f);
}

int main(int argc, char** argv) {
  if (argc != 5) { fprintf(stderr, "usage: %s IN.f32 ROWS COLS OUT_PREFIX\n", argv[0]); return 2; }
  const long rows = atol(argv[2]), cols = atol(argv[3]);
  float* x = malloc(sizeof(float) * rows * cols);
  FILE* f = fopen(argv[1], "rb");
  if (!f || fread(x, sizeof(float), rows * cols, f) != (size_t)(rows * cols)) { perror(argv[1]); return 1; }
  fclose(f);
  if (cols % QK_NVFP4 == 0) {
    block_nvfp4* nv = malloc(sizeof(block_nvfp4) * rows * (cols / QK_NVFP4));
    float* back = malloc(sizeof(float) * rows * cols);
    for (long r = 0; r < rows; ++r) {
      quantize_row_nvfp4_ref(x + r * cols, nv + r * (cols / QK_NVFP4), cols);
      dequantize_row_nvfp4(nv + r * (cols / QK_NVFP4), back + r * cols, cols);
    }
    write_all(argv[4], "nvfp4", nv, sizeof(block_nvfp4) * rows * (cols / QK_NVFP4));
    write_all(argv[4], "nvfp4_deq", back, sizeof(float) * rows * cols);
  }
  if (cols % QK_MXFP4 == 0) {
    block_mxfp4* mx = malloc(sizeof(block_mxfp4) * rows * (cols / QK_MXFP4));
    for (long r = 0; r < rows; ++r) quantize_row_mxfp4_ref(x + r * cols, mx + r * (cols / QK_MXFP4), cols);
    write_all(argv[4], "mxfp4", mx, sizeof(block_mxfp4) * rows * (cols / QK_MXFP4));
  }
  return 0;
}
