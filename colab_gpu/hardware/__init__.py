"""The hardware layer (the lowest): the device a learner asks for (`device`), every rule that follows from a
GPU's compute capability (`capability`) and the machine's facts (`machine`: platform, CPU cores, RAM, driver).
It imports nothing else of colab_gpu.
"""
