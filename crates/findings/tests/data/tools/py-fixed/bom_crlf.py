x = "é😀" ; y = dict()
if x == None:
    pass
