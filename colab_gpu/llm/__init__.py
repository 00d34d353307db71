"""The language-model layer (lessons 14 and 15): memory formulas (`llm_memory`), a small decoder with a KV cache
(`tiny_lm`), LoRA, Hugging Face models (`hub_models`) and the ledger of a training step. It imports the layers
below it.
"""
