import os, sys
x = "é😀" ; y = dict()
if x == None:
    pass
