# Run from this directory: PYTHONPATH=<Pillow> python3 make-fixtures.py (the JPEGs are committed; Pillow 13 wrote them).
# Makes the Oracle example's fixture photos: a face, a landscape and three frames of a ball rolling across a field.
import random
from PIL import Image, ImageDraw, ImageFilter

random.seed(44)

def grain(image, amount=10):
    pixels = image.load()
    w, h = image.size
    for y in range(h):
        for x in range(w):
            r, g, b = pixels[x, y]
            d = random.randint(-amount, amount)
            pixels[x, y] = (max(0, min(255, r + d)), max(0, min(255, g + d)), max(0, min(255, b + d)))
    return image

def gradient(size, top, bottom):
    w, h = size
    image = Image.new("RGB", size)
    draw = ImageDraw.Draw(image)
    for y in range(h):
        t = y / max(h - 1, 1)
        draw.line([(0, y), (w, y)], fill=tuple(int(a + (b - a) * t) for a, b in zip(top, bottom)))
    return image

# A face, 480x640 (a phone's portrait crop).
face = gradient((480, 640), (70, 90, 120), (30, 40, 60))
d = ImageDraw.Draw(face)
d.ellipse([90, 470, 390, 700], fill=(60, 70, 140))                 # shoulders
d.rectangle([200, 400, 280, 500], fill=(214, 170, 140))            # neck
d.ellipse([110, 110, 370, 450], fill=(226, 184, 152))              # face
d.chord([100, 70, 380, 330], 180, 360, fill=(70, 45, 30))          # hair
d.ellipse([95, 250, 125, 320], fill=(214, 170, 140))               # ears
d.ellipse([355, 250, 385, 320], fill=(214, 170, 140))
for x in (175, 275):
    d.ellipse([x - 28, 245, x + 28, 275], fill=(250, 250, 245))    # eyes
    d.ellipse([x - 11, 249, x + 11, 271], fill=(70, 110, 60))
    d.ellipse([x - 5, 255, x + 5, 265], fill=(10, 10, 10))
    d.line([(x - 32, 225), (x + 30, 220)], fill=(60, 40, 25), width=6)  # brows
d.polygon([(240, 280), (225, 345), (255, 345)], fill=(205, 160, 130))  # nose
d.arc([185, 345, 295, 405], 15, 165, fill=(160, 60, 60), width=6)     # smile
face = grain(face.filter(ImageFilter.GaussianBlur(1.5)), 6)
face.save("face-480x640.jpg", quality=80, optimize=True)

# A picture, 1200x600: a sunset over hills and a lake.
picture = gradient((1200, 600), (250, 170, 90), (120, 60, 110))
d = ImageDraw.Draw(picture)
d.ellipse([760, 170, 900, 310], fill=(255, 230, 150))
d.polygon([(0, 420), (250, 250), (520, 400), (800, 280), (1200, 430), (1200, 600), (0, 600)], fill=(60, 50, 80))
d.rectangle([0, 470, 1200, 600], fill=(70, 80, 130))
for y in range(480, 600, 12):
    d.line([(790, y), (870, y)], fill=(230, 190, 140), width=3)
picture = grain(picture.filter(ImageFilter.GaussianBlur(2)), 3)
picture.save("sunset-1200x600.jpg", quality=80, optimize=True)

# Three frames of a clip, 320x240: a red ball rolling left to right across a lawn.
for index, x in enumerate((60, 160, 260)):
    frame = gradient((320, 240), (140, 190, 240), (200, 225, 250))
    d = ImageDraw.Draw(frame)
    d.rectangle([0, 160, 320, 240], fill=(70, 150, 60))
    d.ellipse([x - 22, 118, x + 22, 162], fill=(210, 40, 40))
    d.ellipse([x - 12, 126, x - 2, 136], fill=(240, 150, 150))
    frame = grain(frame.filter(ImageFilter.GaussianBlur(1)), 6)
    frame.save(f"ball-frame{index + 1}-320x240.jpg", quality=80, optimize=True)
