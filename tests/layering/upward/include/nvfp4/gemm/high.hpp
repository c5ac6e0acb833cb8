// Fixture: a gemm/ header.
#pragma once
