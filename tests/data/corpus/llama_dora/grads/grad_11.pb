BUbase_model.model.model.layers.1.self_attn.v_proj.lora_magnitude_vector.default.weightJ@‰Û;GŒ»&§;j¼j+é:Š‡¼
—‹ºÄrå»™¶J¼Àp;²š¼VäŽ;4p":¢Ê`»Gõä:9él;