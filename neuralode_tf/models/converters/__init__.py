"""Trained networks read as ODEs, sharing their parameters: timm ViTs (:mod:`.timm`), ResNets (:mod:`.resnet_ode`;
the attention-augmented ones of :mod:`.augmented_resnet`) and Hugging Face transformers models
(:mod:`.huggingface`, one declared family per architecture, in its registry).
"""
