"""Fixed few-shot chain-of-thought exemplars for GSM8K and MGSM-ZH.

English: the 8 exemplars of Wei et al. 2022, "Chain-of-Thought Prompting Elicits Reasoning in
Large Language Models" (their math word problem prompt), each answer ending "The answer is N.".
Chinese: our translation of the same 8 problems, in MGSM's native-exemplar format (Shi et al.
2022): question prefix "问题：", answer prefix "逐步解答：", final sentence "答案是 N。".
Pairs are ``(question, answer)`` without prefixes; the tasks add them.
"""

from __future__ import annotations

GSM8K_EXEMPLARS: tuple[tuple[str, str], ...] = (
    (
        "There are 15 trees in the grove. Grove workers will plant trees in the grove today. "
        "After they are done, there will be 21 trees. How many trees did the grove workers "
        "plant today?",
        "There are 15 trees originally. Then there were 21 trees after some more were planted. "
        "So there must have been 21 - 15 = 6. The answer is 6.",
    ),
    (
        "If there are 3 cars in the parking lot and 2 more cars arrive, how many cars are in "
        "the parking lot?",
        "There are originally 3 cars. 2 more cars arrive. 3 + 2 = 5. The answer is 5.",
    ),
    (
        "Leah had 32 chocolates and her sister had 42. If they ate 35, how many pieces do they "
        "have left in total?",
        "Originally, Leah had 32 chocolates. Her sister had 42. So in total they had "
        "32 + 42 = 74. After eating 35, they had 74 - 35 = 39. The answer is 39.",
    ),
    (
        "Jason had 20 lollipops. He gave Denny some lollipops. Now Jason has 12 lollipops. "
        "How many lollipops did Jason give to Denny?",
        "Jason started with 20 lollipops. Then he had 12 after giving some to Denny. So he gave "
        "Denny 20 - 12 = 8. The answer is 8.",
    ),
    (
        "Shawn has five toys. For Christmas, he got two toys each from his mom and dad. How "
        "many toys does he have now?",
        "Shawn started with 5 toys. If he got 2 toys each from his mom and dad, then that is 4 "
        "more toys. 5 + 4 = 9. The answer is 9.",
    ),
    (
        "There were nine computers in the server room. Five more computers were installed each "
        "day, from monday to thursday. How many computers are now in the server room?",
        "There were originally 9 computers. For each of 4 days, 5 more computers were added. "
        "So 5 * 4 = 20 computers were added. 9 + 20 is 29. The answer is 29.",
    ),
    (
        "Michael had 58 golf balls. On tuesday, he lost 23 golf balls. On wednesday, he lost 2 "
        "more. How many golf balls did he have at the end of wednesday?",
        "Michael started with 58 golf balls. After losing 23 on tuesday, he had 58 - 23 = 35. "
        "After losing 2 more, he had 35 - 2 = 33 golf balls. The answer is 33.",
    ),
    (
        "Olivia has $23. She bought five bagels for $3 each. How much money does she have left?",
        "Olivia had 23 dollars. 5 bagels for 3 dollars each will be 5 x 3 = 15 dollars. So she "
        "has 23 - 15 dollars left. 23 - 15 is 8. The answer is 8.",
    ),
)

MGSM_ZH_EXEMPLARS: tuple[tuple[str, str], ...] = (
    (
        "果园里有 15 棵树。今天果园工人要在果园里种树。种完之后，果园里将有 21 棵树。"
        "果园工人今天种了多少棵树？",
        "果园里原来有 15 棵树。种了一些之后有 21 棵树。所以一定种了 21 - 15 = 6 棵。答案是 6。",
    ),
    (
        "停车场里有 3 辆车，又开来了 2 辆车，停车场里现在有多少辆车？",
        "停车场里原来有 3 辆车。又开来了 2 辆。3 + 2 = 5。答案是 5。",
    ),
    (
        "莉娅有 32 块巧克力，她的姐姐有 42 块。如果她们吃掉了 35 块，她们一共还剩多少块？",
        "莉娅原来有 32 块巧克力，她的姐姐有 42 块。所以她们一共有 32 + 42 = 74 块。"
        "吃掉 35 块之后，她们还剩 74 - 35 = 39 块。答案是 39。",
    ),
    (
        "杰森有 20 根棒棒糖。他给了丹尼一些棒棒糖。现在杰森还有 12 根棒棒糖。"
        "杰森给了丹尼多少根棒棒糖？",
        "杰森一开始有 20 根棒棒糖。给了丹尼一些之后还剩 12 根。所以他给了丹尼 20 - 12 = 8 根。"
        "答案是 8。",
    ),
    (
        "肖恩有五个玩具。圣诞节时，他从妈妈和爸爸那里各得到两个玩具。他现在有多少个玩具？",
        "肖恩一开始有 5 个玩具。他从妈妈和爸爸那里各得到 2 个，就是多了 4 个玩具。5 + 4 = 9。"
        "答案是 9。",
    ),
    (
        "机房里原来有九台电脑。从周一到周四，每天又安装了五台电脑。机房里现在有多少台电脑？",
        "机房里原来有 9 台电脑。4 天里每天增加 5 台，所以一共增加了 5 * 4 = 20 台。"
        "9 + 20 = 29。答案是 29。",
    ),
    (
        "迈克尔有 58 个高尔夫球。周二他丢了 23 个。周三他又丢了 2 个。"
        "周三结束时他还有多少个高尔夫球？",
        "迈克尔一开始有 58 个高尔夫球。周二丢了 23 个之后，他有 58 - 23 = 35 个。"
        "又丢了 2 个之后，他有 35 - 2 = 33 个。答案是 33。",
    ),
    (
        "奥利维亚有 23 美元。她买了五个百吉饼，每个 3 美元。她还剩多少钱？",
        "奥利维亚有 23 美元。5 个百吉饼每个 3 美元，一共 5 * 3 = 15 美元。"
        "所以她还剩 23 - 15 = 8 美元。答案是 8。",
    ),
)
