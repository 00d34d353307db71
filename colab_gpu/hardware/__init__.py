"""The hardware layer (the lowest): the device a learner asks for (`device`), every rule that follows from a
GPU's compute capability (`capability`), the course's GPUs in one table (`gpus`), the machine's facts (`machine`:
platform, CPU cores, RAM, driver) and the units memory is counted in (`units`). It imports nothing else of
colab_gpu.
"""
