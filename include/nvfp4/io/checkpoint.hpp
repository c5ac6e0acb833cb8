// nvfp4/io/checkpoint.hpp: a whole quantized checkpoint in a form no file format owns, with what
// goes with it: the checkpoint and its weights (io/checkpoint_model.hpp), the checks every reader
// runs on load and every writer before writing (io/checkpoint_checks.hpp), and the annotation a
// writer adds for what its format cannot hold (io/checkpoint_annotation.hpp). The readers and
// writers of ModelOpt, compressed-tensors, GGUF and torchao files (io/modelopt.hpp, ...) meet
// here, so a conversion is a read and a write.
#pragma once

#include "nvfp4/io/checkpoint_annotation.hpp"
#include "nvfp4/io/checkpoint_checks.hpp"
#include "nvfp4/io/checkpoint_model.hpp"
