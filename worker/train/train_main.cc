// sextant-train: the built-in trainer on its own, without gRPC (same as `sextant-worker train`).
#include "worker/train/train_command.h"

int main(int argc, char** argv) { return sextant::train::RunTrainCommand(argc, argv); }
