"""The experiments layer: the course's measured experiments, built from the layers below: training steps timed
(`workloads`), each way of feeding the GPU (`feeding`) and lesson 12's speedrun ladder.
"""
