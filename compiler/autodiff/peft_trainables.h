// What peft trains: a parameter is trainable when its name holds the prefix of a peft tuner at
// the start of a component (peft's `_mark_only_adapters_as_trainable` tests the prefix), or sits in
// a modules_to_save copy. The default of --trainable.
#pragma once

#include <string>
#include <vector>

namespace fbl::autodiff {

// "*lora_*" (LoRA, AdaLoRA, DoRA's lora_magnitude_vector), "*.ia3_*", "*.lokr_*", "*.hada_*", ...
// and "*.modules_to_save.*".
std::vector<std::string> peftTrainableGlobs();

}  // namespace fbl::autodiff
