"""The data layer: the course's data sets (`datasets`, `downloads`), DataLoaders and the DeviceLoader (`loaders`),
augmentation on the CPU or the device, archives and image folders (lesson 13). It imports hardware and measure.
"""
