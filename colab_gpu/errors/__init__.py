"""The errors layer (lesson 09): the error atlas as one table (`atlas`), `cg.explain` and the IPython extension
(`explain`), and `cg.shows_error` (`showing`). It imports the hardware layer only (the menus that give a runtime its
GPU).
"""
