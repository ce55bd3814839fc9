"""The templates the bundled catalogue is generated from (the data-set recipe of ``webshop``):
30 product types in WebShop's five categories, each with its category path, its attribute
pool, its option kinds and values, and a price range.

Within a type no two attributes and no two values of one option kind match each other under
the reward's fuzzy test (:func:`~skillgrad.envs.webshop.reward.token_set_ratio` above 85, after
the colour normalisation), so a product that lacks one cannot earn it through another; the
generator checks this.
"""

from __future__ import annotations

from dataclasses import dataclass

# How an instruction asks for an option of each kind ("{}" is the value).
OPTION_PHRASES: dict[str, tuple[str, ...]] = {
    "color": ("in {} color", "in {}", "that comes in {}"),
    "size": ("in size {}", "in a size {}", "size {}"),
    "scent": ("with the {} scent", "in {} scent"),
    "flavor": ("in {} flavor", "with {} flavor"),
    "count": ("in the {} size", "as a {}"),
    "volume": ("in the {} bottle", "in {} size"),
    "length": ("that is {} long", "in the {} length"),
    "style": ("in the {} style", "{} style"),
    "capacity": ("with {} capacity", "in the {} version"),
}
OPENERS = ("i need", "i want", "i am looking for", "im looking for", "find me",
           "i would like", "looking for", "please get me")


@dataclass(frozen=True)
class ProductType:
    query: str  # the shop's search query for the type: what an instruction calls it
    title: str  # how product titles name it
    plural: bool
    category: str
    path: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: tuple[int, int]


def _type(query: str, title: str, category: str, path: str, attributes: str,
          options: dict[str, str], price: tuple[int, int], plural: bool = False
          ) -> ProductType:
    return ProductType(query, title, plural, category, path,
                       tuple(a.strip() for a in attributes.split(",")),
                       tuple((k, tuple(v.strip() for v in vs.split(","))) for k, vs in
                             options.items()), price)


_BEAUTY = "Beauty & Personal Care"
_FOOD = "Grocery & Gourmet Food"
_WOMEN = "Clothing, Shoes & Jewelry › Women"
_MEN = "Clothing, Shoes & Jewelry › Men"
_HOME = "Home & Kitchen › Furniture"
_TECH = "Electronics"
COLORS_WEAR = "black, white, navy, grey, burgundy, olive, beige, pink"
COLORS_HOME = "black, white, walnut, grey, espresso, natural, blue"
COLORS_TECH = "black, white, silver, blue, red, green"

TYPES: tuple[ProductType, ...] = (
    # beauty
    _type("shampoo", "Shampoo", "beauty", f"{_BEAUTY} › Hair Care › Shampoo & Conditioner › "
          "Shampoos", "sulfate free, paraben free, tea tree, argan oil, color safe, "
          "for dry hair, natural ingredients, cruelty free",
          {"scent": "lavender, citrus, coconut, unscented, peppermint",
           "volume": "8 fl oz, 16 fl oz, 32 fl oz"}, (8, 38)),
    _type("face moisturizer", "Face Moisturizer", "beauty", f"{_BEAUTY} › Skin Care › Face › "
          "Creams & Moisturizers", "fragrance free, hyaluronic acid, oil free, spf 30, "
          "for sensitive skin, non comedogenic, vitamin c, anti aging",
          {"volume": "1.7 fl oz, 3.4 fl oz, 0.5 fl oz"}, (9, 55)),
    _type("lipstick", "Lipstick", "beauty", f"{_BEAUTY} › Makeup › Lips › Lipstick",
          "long lasting, matte finish, cruelty free, vegan, paraben free, moisturizing, "
          "highly pigmented, smudge proof",
          {"color": "red, nude, coral, berry, mauve, plum, pink"}, (6, 30)),
    _type("nail polish", "Nail Polish", "beauty", f"{_BEAUTY} › Foot, Hand & Nail Care › "
          "Nail Art & Polish › Nail Polish", "quick dry, non toxic, long lasting, "
          "chip resistant, vegan, high gloss, gel effect",
          {"color": "red, black, teal, lavender, coral, gold, white",
           "count": "single bottle, 3 piece set, 6 pack"}, (5, 28)),
    _type("hair dryer", "Hair Dryer", "beauty", f"{_BEAUTY} › Hair Care › Styling Tools & "
          "Appliances › Hair Dryers", "ionic, fast drying, low noise, lightweight, "
          "diffuser attachment, cool shot button, ceramic, foldable handle",
          {"color": "black, pink, white, purple, gold"}, (19, 89)),
    _type("body wash", "Body Wash", "beauty", f"{_BEAUTY} › Skin Care › Body › Cleansers › "
          "Body Washes", "moisturizing, sulfate free, shea butter, hypoallergenic, "
          "dermatologist tested, aloe vera, plant based",
          {"scent": "eucalyptus, vanilla, unscented, cucumber melon, sandalwood",
           "volume": "16 fl oz, 32 fl oz, 8 fl oz"}, (5, 32)),
    # food
    _type("ground coffee", "Ground Coffee", "food", f"{_FOOD} › Beverages › Coffee, Tea & "
          "Cocoa › Coffee › Ground Coffee", "organic, dark roast, fair trade, low acid, "
          "single origin, decaf, kosher, non gmo",
          {"flavor": "hazelnut, french vanilla, caramel, mocha, original",
           "count": "12 ounce bag, 2 pound bag, 6 pack"}, (7, 48)),
    _type("protein bars", "Protein Bars", "food", f"{_FOOD} › Snack Foods › Bars › Protein "
          "Bars", "gluten free, low sugar, high protein, keto friendly, non gmo, "
          "plant based, individually wrapped, no artificial sweeteners",
          {"flavor": "chocolate peanut butter, cookie dough, birthday cake, "
           "salted caramel, lemon", "count": "12 bars, 30 bars, 4 bars"}, (9, 45),
          plural=True),
    _type("herbal tea", "Herbal Tea", "food", f"{_FOOD} › Beverages › Coffee, Tea & Cocoa › "
          "Tea › Herbal", "caffeine free, organic, non gmo, individually wrapped, kosher, "
          "gluten free, sugar free",
          {"flavor": "chamomile, peppermint, ginger turmeric, hibiscus, rooibos",
           "count": "20 tea bags, 48 tea bags, 6 boxes"}, (4, 30)),
    _type("beef jerky", "Beef Jerky", "food", f"{_FOOD} › Snack Foods › Jerky & Dried Meats "
          "› Beef Jerky", "high protein, gluten free, low sodium, keto friendly, grass fed, "
          "no added sugar, shelf stable",
          {"flavor": "original, teriyaki, peppered, sweet chipotle, smoked",
           "count": "single bag, family size, 8 pack"}, (6, 42)),
    _type("olive oil", "Extra Virgin Olive Oil", "food", f"{_FOOD} › Pantry Staples › "
          "Cooking Oils › Olive Oil", "cold pressed, organic, non gmo, kosher, glass "
          "bottle, single origin, first harvest",
          {"volume": "16.9 fl oz, 33.8 fl oz, 1 gallon"}, (8, 60)),
    _type("snack crackers", "Snack Crackers", "food", f"{_FOOD} › Snack Foods › Crackers",
          "gluten free, whole grain, vegan, non gmo, low sodium, baked not fried, "
          "shelf stable, no artificial flavors",
          {"flavor": "sea salt, cheddar, rosemary, everything bagel, black pepper",
           "count": "single box, 4 pack, 12 pack"}, (4, 35), plural=True),
    # fashion
    _type("women's sweatpants", "Women's Sweatpants", "fashion", f"{_WOMEN} › Clothing › "
          "Active › Active Pants › Sweatpants", "relaxed fit, high waist, drawstring "
          "closure, machine wash, elastic waistband, moisture wicking, side pockets, "
          "fleece lined", {"color": COLORS_WEAR, "size": "small, medium, large, xl, xxl"},
          (15, 48), plural=True),
    _type("men's running shoes", "Men's Running Shoes", "fashion", f"{_MEN} › Shoes › "
          "Athletic › Running › Road Running", "non slip, rubber sole, lace up, arch "
          "support, breathable mesh, lightweight, memory foam, wide toe box",
          {"color": "black, white, grey, navy, red, blue", "size": "7, 8, 9, 10, 11, 12"},
          (29, 120), plural=True),
    _type("women's t-shirt", "Women's T-Shirt", "fashion", f"{_WOMEN} › Clothing › Tops, "
          "Tees & Blouses › T-Shirts", "short sleeve, crew neck, cotton, loose fit, "
          "machine wash, v neck, tie dye, tunic length",
          {"color": COLORS_WEAR, "size": "small, medium, large, xl, xxl"}, (9, 35)),
    _type("men's rain jacket", "Men's Rain Jacket", "fashion", f"{_MEN} › Clothing › "
          "Jackets & Coats › Active & Performance", "waterproof, zipper closure, hooded, "
          "packable, windproof, breathable, reflective details, adjustable cuffs",
          {"color": "black, navy, olive, red, grey, yellow",
           "size": "small, medium, large, xl, xxl"}, (35, 140)),
    _type("crew socks", "Crew Socks", "fashion", f"{_MEN} › Clothing › Socks › Casual Socks",
          "moisture wicking, cushioned sole, arch support, cotton blend, seamless toe, "
          "odor resistant, athletic", {"color": "black, white, grey, navy",
                                       "count": "single pair, 3 pairs, 10 pairs"}, (8, 32),
          plural=True),
    _type("women's sandals", "Women's Sandals", "fashion", f"{_WOMEN} › Shoes › Sandals › "
          "Flat Sandals", "open toe, ankle strap, flat, memory foam, non slip, adjustable "
          "buckle, vegan leather, arch support",
          {"color": "black, brown, beige, white, gold, silver", "size": "6, 7, 8, 9, 10"},
          (15, 70), plural=True),
    # furniture
    _type("ottoman bench", "Storage Ottoman Bench", "furniture", f"{_HOME} › Living Room "
          "Furniture › Ottomans", "storage space, faux leather, easy assembly, living room, "
          "foldable, tufted top, solid wood legs",
          {"color": COLORS_HOME, "size": "30 inch, 45 inch, 15 inch cube"}, (35, 150)),
    _type("bookshelf", "Bookshelf", "furniture", f"{_HOME} › Home Office Furniture › "
          "Bookcases", "easy assembly, 5 tier, industrial style, anti tip kit, engineered "
          "wood, metal frame, adjustable shelves",
          {"color": COLORS_HOME}, (40, 190)),
    _type("office chair", "Office Chair", "furniture", f"{_HOME} › Home Office Furniture › "
          "Home Office Desk Chairs", "lumbar support, adjustable height, mesh back, "
          "swivel, padded armrests, ergonomic, high back, easy assembly",
          {"color": "black, grey, white, blue, pink"}, (49, 230)),
    _type("coffee table", "Coffee Table", "furniture", f"{_HOME} › Living Room Furniture › "
          "Tables › Coffee Tables", "solid wood, lift top, storage shelf, living room, "
          "easy assembly, round, mid century, glass top",
          {"color": COLORS_HOME}, (45, 260)),
    _type("nightstand", "Nightstand", "furniture", f"{_HOME} › Bedroom Furniture › "
          "Nightstands", "2 drawers, charging station, easy assembly, solid wood, "
          "open shelf, bedroom, modern",
          {"color": COLORS_HOME, "count": "single, set of 2"}, (29, 160)),
    _type("floor lamp", "Floor Lamp", "furniture", f"{_HOME} › Lighting › Floor Lamps",
          "dimmable, led bulb included, remote control, living room, adjustable head, "
          "energy efficient, fabric shade, reading light",
          {"color": "black, white, gold, silver, bronze"}, (25, 140)),
    # electronics
    _type("wireless earbuds", "Wireless Earbuds", "electronics", f"{_TECH} › Headphones, "
          "Earbuds & Accessories › Earbuds", "noise cancelling, bluetooth 5.3, long battery "
          "life, water resistant, fast charging, built in microphone, touch control, "
          "charging case", {"color": COLORS_TECH}, (19, 130), plural=True),
    _type("phone case", "Phone Case", "electronics", f"{_TECH} › Cell Phones & Accessories › "
          "Cases, Holsters & Sleeves › Basic Cases", "shockproof, slim fit, wireless "
          "charging compatible, raised edges, kickstand, clear back, card holder",
          {"color": "black, clear, blue, pink, green, purple",
           "style": "iphone 15, galaxy s24, pixel 8"}, (7, 35)),
    _type("usb c charger", "USB C Charger", "electronics", f"{_TECH} › Cell Phones & "
          "Accessories › Chargers & Power Adapters › Wall Chargers", "fast charging, "
          "foldable plug, dual port, gan technology, travel size, overheat protection",
          {"color": "black, white", "capacity": "20w, 65w, 100w"}, (9, 60)),
    _type("hdmi cable", "HDMI Cable", "electronics", f"{_TECH} › Television & Video › "
          "Accessories › Cables › HDMI Cables", "high speed, 4k, gold plated, braided, "
          "ethernet support, 8k, flexible",
          {"length": "3 ft, 6 ft, 15 ft", "count": "1 cable, 2 pack"}, (6, 30)),
    _type("portable speaker", "Portable Bluetooth Speaker", "electronics", f"{_TECH} › "
          "Portable Audio & Video › Portable Speakers", "waterproof, long battery life, "
          "loud sound, deep bass, built in microphone, stereo pairing, shockproof",
          {"color": COLORS_TECH}, (19, 150)),
    _type("wireless mouse", "Wireless Mouse", "electronics", f"{_TECH} › Computers & "
          "Accessories › Mice", "ergonomic, silent click, rechargeable, usb receiver, "
          "adjustable dpi, bluetooth, compact",
          {"color": "black, white, grey, pink, blue"}, (8, 70)),
)

# Sentences and words of no attribute, to fill descriptions, bullet points and reviews.
FILLERS: dict[str, tuple[str, ...]] = {
    "beauty": ("a daily favorite for the whole family", "made in small batches",
               "easy to use at home or on the go", "packaged in a recyclable container",
               "formulated by experienced chemists", "a great gift idea"),
    "food": ("packed fresh for great taste", "a pantry essential",
             "perfect for the office or a road trip", "sourced from trusted growers",
             "easy to share with friends", "a tasty everyday treat"),
    "fashion": ("a comfortable choice for every day", "designed for an easy fit",
                "goes well with jeans or shorts", "a wardrobe staple",
                "great for travel, errands and the gym", "durable stitching"),
    "furniture": ("a handsome addition to any home", "all hardware and tools included",
                  "sturdy construction for years of use", "wipes clean with a damp cloth",
                  "fits small apartments and large homes", "simple step by step manual"),
    "electronics": ("works with most devices", "backed by a 12 month warranty",
                    "plug and play setup", "tested for quality and safety",
                    "slim design that fits in a bag", "includes a quick start guide"),
}
REVIEW_TITLES = ("Great value", "Works as described", "Just okay", "Would buy again",
                 "Not for me", "Exactly what I wanted", "Good but not perfect")
REVIEW_BODIES = ("Arrived quickly and well packed.", "Does what it says.",
                 "Quality is fine for the price.", "This is my second order.",
                 "Not quite what I expected.", "Good, but delivery was slow.",
                 "My partner likes it a lot.")
BRAND_SYLLABLES = ("ka", "lo", "mi", "ra", "ve", "no", "ta", "zu", "pe", "si", "do", "ri",
                   "ne", "vo", "la", "bo", "fi", "gu", "qu", "ke")
BRAND_ENDINGS = ("", "x", "n", "ly", "co", "ia")
