// Fixture: an internal of scaling/.
#pragma once
