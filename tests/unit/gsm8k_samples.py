"""GSM8K-style training samples (id, question, annotated solution) shared by the judge-data and
spelling tests: inline, no data wheel."""

from __future__ import annotations

NATALIA = (
    "gsm8k-train-0",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May?",
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n"
    "#### 72",
)
LOTS = (
    "lots",
    "A builder buys 3 lots for $1,200 each and sells all of them for $5,000. What is his profit?",
    "The lots cost 3 x $1,200 = $<<3*1200=3600>>3,600.\n"
    "His profit is $5,000 - $3,600 = $<<5000-3600=1400>>1,400.\n"
    "#### 1,400",
)
APPLES = (
    "apples",
    "Apples cost $0.75 each and a rope costs $2.5 a meter. Sam buys 8 apples and 3 meters of "
    "rope and pays with a $20 bill. How much change does he get?",
    "The apples cost 8 * 0.75 = $<<8*0.75=6>>6.\n"
    "The rope costs 2.5 * 3 = $<<2.5*3=7.5>>7.5.\n"
    "He spends 6 + 7.5 = $<<6+7.5=13.5>>13.5 in total.\n"
    "His change is 20 - 13.5 = $<<20-13.5=6.5>>6.5.\n"
    "#### 6.5",
)
JAGUARS = (
    "jaguars",
    "Each jaguar eats 5 snakes per day and there are 6 jaguars. Each snake ate 3 birds. "
    "How many birds are eaten per day?",
    "The jaguars eat 5 snakes/jaguar * 6 jaguars = <<5*6=30>>30 snakes.\n"
    "The snakes ate 30 snakes * 3 birds/snake = <<30*3=90>>90 birds.\n"
    "#### 90",
)
