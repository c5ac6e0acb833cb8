// Fixture: an internal of one GEMM family (gemm/fp4/).
#pragma once
