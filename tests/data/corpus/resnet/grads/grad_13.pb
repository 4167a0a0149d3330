
B:base_model.model.classifier.modules_to_save.default.1.biasJ(╧=[y>nYв=└e┤=^;у╛ву&>~>яH┬╛	ў`=sёв=